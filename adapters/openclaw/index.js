// lightmem2 for OpenClaw: a thin plugin that forwards each hook to the Python sidecar
// (`lightmem2 serve`) over loopback HTTP and fails open.
//
//   service     starts the sidecar with the Gateway and stops it with it (started on first use in
//               `openclaw agent --local`, where services do not run, and stopped at exit)
//   engine      context engine "lightmem2": assemble() returns the history as lightmem2 transforms
//               it (in aggressive mode a finished task becomes one summary message); compaction
//               stays with the runtime, which lightmem2 brackets: the history is archived before it,
//               and its summary carries lightmem2's record and search hint after (lib/compaction.js)
//   middleware  a tool result is reduced once as it enters the history; tool_result_persist stores
//               that same reduced form in the transcript
//   command     /lightmem2 status|report|doctor|visual|mode ...: the CLI's text, no model call
//   tool        lightmem2_recover: an archived original, byte for byte
//   tool        lightmem2_search: find archived text by words, with keys and lines
//
// Fail-open: any error (sidecar down, slow, a bad answer) leaves OpenClaw's payload as it was.

import { Seen, archiveBefore, noted } from "./lib/compaction.js";
import { estimateTokens, fromChat, modelOf, resultFromOutput, resultToOutput, toChat, wireApiOf } from "./lib/messages.js";
import { Sidecar, hostSettings } from "./lib/sidecar.js";

const ID = "lightmem2";
const RECOVER_TOOL = "lightmem2_recover";
const SEARCH_TOOL = "lightmem2_search";
const VERSION = "0.1.0";
const MEMO_LIMIT = 2000;

// One sidecar per OpenClaw process and settings, shared by every copy of this module. register() runs
// once per load mode (full, discovery, ...), and the Gateway of OpenClaw 2026.9.6 evaluates the plugin
// from more than one copy of the package in one process, so a module-level map was one per copy, each
// with a serve of its own and an exit hook per sidecar. The map lives on globalThis (a registered
// symbol, so every copy finds it) with one exit hook for all its sidecars, added once per process.
//
// That one hook also raises the process's listener limit by one: OpenClaw's own exit listeners reach
// Node's default limit of 10 by themselves (measured on 2026.9.6: 9 at a first Gateway start, 10 at a
// start on existing state, one per SQLite database it opens), so any further one, ours, made the
// Gateway log MaxListenersExceededWarning. Ours is not a leak (never more than one), and OpenClaw's
// leak check keeps the margin it had without the plugin.
const SIDECARS = Symbol.for("lightmem2.openclaw.sidecars");

function sharedSidecars() {
  let sidecars = globalThis[SIDECARS];
  if (!(sidecars instanceof Map)) {
    sidecars = new Map();
    globalThis[SIDECARS] = sidecars;
    const limit = process.getMaxListeners();
    if (limit > 0) process.setMaxListeners(limit + 1); // 0: no limit
    process.once("exit", () => {
      for (const sidecar of sidecars.values()) sidecar.stop(); // only a serve this process started
    });
  }
  return sidecars;
}

function sidecarFor(settings, logger) {
  const sidecars = sharedSidecars();
  const key = `${VERSION}\u0000${settings.command}\u0000${settings.port}`; // another version: its own
  let found = sidecars.get(key);
  if (!found) {
    found = new Sidecar(settings, logger);
    sidecars.set(key, found);
  }
  return found;
}

/** Bounded insertion-ordered memo (tool call id -> reduced content). */
class Memo extends Map {
  set(key, value) {
    if (this.size >= MEMO_LIMIT && !this.has(key)) this.delete(this.keys().next().value);
    return super.set(key, value);
  }
}

function sessionOf(ctx) {
  return String(ctx?.sessionId || ctx?.sessionKey || "openclaw");
}

function createEngine(sidecar, logger) {
  const committed = new Set();
  const seen = new Seen(); // session -> the chat-form history last assembled (archived before a compaction)
  const notes = new Memo(); // session + summary -> the note the sidecar keeps for it
  const conversations = new Seen(); // session -> the key its history was archived under before compacting
  return {
    info: {
      id: ID,
      name: "lightmem2",
      version: VERSION,
      ownsCompaction: false,
      transcriptSemantics: {
        currentTurnFence: "before-current-turn-entry-v1",
        turnAdvancementIdempotency: "atomic-idempotent-v1",
      },
    },
    async ingest() {
      return { ingested: false }; // OpenClaw owns the transcript; we keep no copy
    },
    async assemble(params) {
      const messages = Array.isArray(params.messages) ? params.messages : [];
      let out = messages;
      try {
        // posted on the first turn too (no history yet): the sidecar counts the turn's model calls from it
        const sent = toChat(messages);
        const body = { sessionId: sessionOf(params), messages: sent.chat, wholeTurn: true };
        const api = wireApiOf(messages);
        if (api) body.api = api;
        const model = modelOf(params, messages);
        if (model) body.model = model; // whether its thinking is bound to the history before it
        // the messages' budget before OpenClaw compacts (its model's window less reserve and prompt):
        // aggressive mode compacts under it, whatever the model's window
        const budget = Number(params.tokenBudget);
        if (Number.isFinite(budget) && budget >= 1) body.tokenBudget = Math.floor(budget);
        // the turn's prompt follows this history: a new goal there closes the running task now
        if (typeof params.prompt === "string" && params.prompt.trim()) body.prompt = params.prompt;
        if (sent.chat.length) seen.set(body.sessionId, sent.chat);
        const answer = await sidecar.post("/sidecar/assemble", body);
        if (sent.chat.length) out = fromChat(messages, sent, answer.messages, answer.collapsed, answer.thinking);
      } catch (err) {
        logger?.debug?.(`lightmem2: assemble passed through: ${err.message}`);
      }
      const sid = sessionOf(params);
      out = await noted(sidecar, sid, out, notes, conversations.get(sid), logger);
      return { messages: out, estimatedTokens: estimateTokens(out) };
    },
    async compact(params) {
      const sid = sessionOf(params);
      const key = await archiveBefore(sidecar, sid, seen.get(sid), logger);
      if (key) conversations.set(sid, key);
      const sdk = await import("openclaw/plugin-sdk/core");
      return sdk.delegateCompactionToRuntime(params);
    },
    async commitTurn(params) {
      const key = String(params.advancementKey);
      if (committed.has(key)) return { status: "duplicate" };
      committed.add(key);
      const turn = turnCalls(params.messages);
      if (turn) {
        sidecar
          .post("/sidecar/afterTurn", { sessionId: sessionOf(params), ...turn, api: "anthropic" })
          .catch((err) => logger?.debug?.(`lightmem2: usage not recorded: ${err.message}`));
      }
      return { status: "committed" };
    },
  };
}

/**
 * A turn's model calls: the turn in chat form and, per call, where its reply sits in it and the
 * provider's usage (Anthropic's field names). Each assistant message with usage is one model call,
 * which received the assembled history plus the turn's messages before its reply. Null for a turn
 * with no model call (a command reply reports zeros).
 */
export function turnCalls(messages) {
  const sent = toChat(messages || []);
  const calls = [];
  sent.index.forEach((from, at) => {
    const u = messages[from]?.role === "assistant" ? messages[from].usage : null;
    if (!u) return;
    const usage = {
      input_tokens: Number(u.input) || 0,
      cache_read_input_tokens: Number(u.cacheRead) || 0,
      cache_creation_input_tokens: Number(u.cacheWrite) || 0,
      output_tokens: Number(u.output) || 0,
    };
    if (Object.values(usage).some((n) => n > 0)) calls.push({ at, usage });
  });
  return calls.length ? { turn: sent.chat, calls } : null;
}

async function runCommand(sidecar, args) {
  const line = `/lightmem2 ${args}`.trim();
  const doctor = /^\s*doctor\b/.test(args);
  let text;
  try {
    text = (await sidecar.post("/sidecar/command", { text: line })).text;
  } catch (err) {
    if (err.status) {
      text = `lightmem2: ${err.detail || err.message}`; // refused or failed there: never retried around it
    } else {
      const argv = splitArgs(args); // the sidecar is down: the CLI answers instead
      text = await sidecar.cli(argv.length ? argv : ["status"]);
      // ...and what it says (the mode, the config in force) is not what OpenClaw runs: it runs without us
      if (!doctor) text = `${sidecar.inactive()}\n${text}`;
    }
  }
  if (doctor) text = `${await sidecar.describe()}\n${text}`;
  return text;
}

/** Split a command line on spaces, honouring simple quotes. */
function splitArgs(line) {
  const out = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m;
  while ((m = re.exec(line))) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

export default {
  id: ID,
  name: "lightmem2",
  description: "Cache-stable, reduced context for long OpenClaw sessions (lightmem2).",
  register(api) {
    const settings = hostSettings(api.pluginConfig);
    const logger = api.logger;
    const sidecar = sidecarFor(settings, logger);
    const reduced = new Memo();

    api.registerService({
      id: "lightmem2-sidecar",
      start: () => {
        void sidecar.ensure(); // in the background: a slow or broken Python side never holds the Gateway up
      },
      stop: () => sidecar.stop(),
    });

    api.registerContextEngine(ID, () => createEngine(sidecar, logger));

    api.registerAgentToolResultMiddleware(
      async (event, ctx) => {
        if (event.toolName === RECOVER_TOOL || event.toolName === SEARCH_TOOL) return undefined;
        const content = event.result?.content;
        if (!Array.isArray(content) || !content.some((p) => p && p.type === "text")) return undefined;
        try {
          const answer = await sidecar.post("/sidecar/toolResult", {
            sessionId: sessionOf(ctx),
            toolCallId: String(event.toolCallId),
            output: resultToOutput(content),
            // the tool tells the output's kind, and what passes verbatim (a recovered original, a catalog)
            toolName: String(event.toolName ?? ""),
            arguments: JSON.stringify(event.args ?? event.params ?? {}),
          });
          const next = resultFromOutput(content, answer.output);
          if (next === content || next.every((p, i) => p === content[i])) return undefined;
          reduced.set(String(event.toolCallId), { from: JSON.stringify(content), to: next });
          return { result: { ...event.result, content: next } };
        } catch (err) {
          logger?.debug?.(`lightmem2: tool result passed through: ${err.message}`);
          return undefined;
        }
      },
      { runtimes: ["openclaw"] },
    );

    // Synchronous: stores the reduced form the model saw, so later turns replay the same bytes. Only
    // a message still holding the very output we reduced is replaced (call ids repeat across sessions).
    api.on("tool_result_persist", (event) => {
      const id = String(event.toolCallId ?? event.message?.toolCallId ?? "");
      const memo = reduced.get(id);
      const msg = event.message;
      if (!memo || !msg || !Array.isArray(msg.content)) return undefined;
      if (JSON.stringify(msg.content) !== memo.from) return undefined;
      return { message: { ...msg, content: memo.to } };
    });

    // Placeholders the model copied from the stabilised head go back to their real values.
    api.on("before_tool_call", async (event, ctx) => {
      const args = JSON.stringify(event.params ?? {});
      if (!args.includes("<") || !sidecar.ready) return undefined;
      try {
        const call = { id: String(event.toolCallId ?? "call"), type: "function", function: { name: event.toolName, arguments: args } };
        const answer = await sidecar.post("/sidecar/afterTurn", {
          sessionId: sessionOf(ctx),
          response: { role: "assistant", content: null, tool_calls: [call] },
        });
        const restored = answer.response?.tool_calls?.[0]?.function?.arguments;
        if (typeof restored !== "string" || restored === args) return undefined;
        return { params: JSON.parse(restored) };
      } catch {
        return undefined;
      }
    });

    api.registerCommand({
      name: ID,
      description: "lightmem2: status | report | doctor | visual | mode [conservative|normal|aggressive]",
      acceptsArgs: true,
      handler: async (ctx) => ({ text: await runCommand(sidecar, String(ctx.args ?? "").trim()) }),
    });

    api.registerTool({
      name: SEARCH_TOOL,
      description:
        "Search everything lightmem2 archived (shortened or paged-out tool outputs) for text, e.g. an " +
        "error message seen earlier. Returns hits with the key and line to pass to lightmem2_recover.",
      parameters: {
        type: "object",
        additionalProperties: false,
        required: ["query"],
        properties: {
          query: { type: "string", description: "Words or a quoted phrase to find." },
          limit: { type: "integer", description: "At most this many hits (default 10, max 20)." },
        },
      },
      async execute(_id, params) {
        const body = { query: String(params?.query ?? "") };
        if (Number.isInteger(params?.limit)) body.limit = params.limit;
        let text;
        try {
          text = (await sidecar.post("/sidecar/search", body)).text;
        } catch (err) {
          if (err.status) text = `lightmem2: ${err.detail || err.message}`;
          else text = await sidecar.cli(["search", body.query, "--all"]);
        }
        return { content: [{ type: "text", text }] };
      },
    });

    api.registerTool({
      name: RECOVER_TOOL,
      description:
        "Recover the original of content lightmem2 shortened, byte for byte. Pass the key from the " +
        "[lightmem2 ...] stub; optionally lines as A:B (1-based, inclusive) to get only part of it.",
      parameters: {
        type: "object",
        additionalProperties: false,
        required: ["key"],
        properties: {
          key: { type: "string", description: "Artifact key from the stub (12 to 32 hex characters)." },
          lines: { type: "string", description: "Optional 1-based inclusive line range, e.g. 10:40." },
        },
      },
      async execute(_id, params) {
        const body = { key: String(params?.key ?? "") };
        if (params?.lines) body.lines = String(params.lines);
        let text;
        try {
          text = (await sidecar.post("/sidecar/recover", body)).text;
        } catch (err) {
          if (err.status) text = `lightmem2: ${err.detail || err.message}`;
          else text = await sidecar.cli(["recover", body.key, ...(body.lines ? ["--lines", body.lines] : [])]);
        }
        return { content: [{ type: "text", text }] };
      },
    });
  },
};
