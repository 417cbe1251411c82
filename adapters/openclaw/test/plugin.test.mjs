// Unit tests of the JS side, without OpenClaw: `node --test adapters/openclaw/test/`.
// The message mapping must be lossless, and every hook must fail open when the sidecar is down.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import plugin from "../index.js";
import { estimateTokens, fromChat, modelOf, resultFromOutput, resultToOutput, toChat, wireApiOf } from "../lib/messages.js";
import { CHALLENGE_HEADER, SECRET_HEADER, Sidecar, hostSettings, proofOf } from "../lib/sidecar.js";

const SECRET = "5e".repeat(32);

/**
 * A stand-in `lightmem2` whose `config sidecar` names a secret file holding `secret`, and `port`
 * (plus `extra`, a JSON fragment such as a mergeError); every run's arguments go to `args.log`.
 */
function fakeCli(secret = SECRET, port = 8787, extra = "") {
  const dir = mkdtempSync(join(tmpdir(), "lightmem2-js-"));
  writeFileSync(join(dir, "sidecar.secret"), `${secret}\n`, { mode: 0o600 });
  const exe = join(dir, "lightmem2");
  writeFileSync(
    exe,
    `#!/bin/sh\nprintf '%s\\n' "$*" >> "${join(dir, "args.log")}"\n` +
      `if [ "$1 $2" = "config sidecar" ]; then echo '{${extra}"port": ${port}, "secretPath": "${join(dir, "sidecar.secret")}"}'; ` +
      `else echo "cli ran $*"; fi\n`,
  );
  chmodSync(exe, 0o755);
  return { exe, dir };
}

/** A fake `lightmem2 serve`: proves `secret` on /sidecar/health and wants it on every other call. */
async function fakeServe(handler, secret = SECRET) {
  const seen = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ url: req.url, body, headers: req.headers });
      res.setHeader("content-type", "application/json");
      const authed = req.headers[SECRET_HEADER] === secret;
      if (req.url === "/sidecar/health") {
        const out = { status: "ok" };
        if (req.headers[CHALLENGE_HEADER]) out.proof = proofOf(secret, req.headers[CHALLENGE_HEADER]);
        if (authed) Object.assign(out, { version: "t", mode: "normal", sessions: 0 });
        return res.end(JSON.stringify(out));
      }
      if (!authed) {
        res.statusCode = req.headers[SECRET_HEADER] ? 403 : 401;
        return res.end(JSON.stringify({ error: "X-Lightmem2-Secret does not match" }));
      }
      handler(req, res, JSON.parse(body || "{}"));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { server, seen, port: server.address().port };
}

const usage = { input: 10, output: 2, cacheRead: 90, cacheWrite: 0, totalTokens: 102, cost: { total: 0 } };
const history = [
  { role: "user", content: "[Mon 2026-11-30 06:05 UTC] read big.log", timestamp: 1 },
  {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "plan", thinkingSignature: "sig" },
      { type: "toolCall", id: "call_1", name: "read", arguments: { path: "big.log" } },
    ],
    api: "openai-completions",
    provider: "fake",
    model: "fake-model",
    usage,
    stopReason: "toolUse",
    timestamp: 2,
  },
  {
    role: "toolResult",
    toolCallId: "call_1",
    toolName: "read",
    content: [{ type: "text", text: "line\n".repeat(10) }, { type: "image", data: "AAAA", mimeType: "image/png" }],
    isError: false,
    timestamp: 3,
  },
  { role: "compactionSummary", summary: "earlier work", tokensBefore: 100, timestamp: 4 },
  { role: "assistant", content: [{ type: "text", text: "done" }], usage, stopReason: "stop", timestamp: 5 },
];

test("toChat skips what chat cannot carry and fromChat of an unchanged answer is the identity", () => {
  const sent = toChat(history);
  assert.deepEqual(sent.index, [0, 1, 2, 4]);
  assert.equal(sent.chat[1].tool_calls[0].function.arguments, '{"path":"big.log"}');
  assert.equal(sent.chat[2].role, "tool");
  const back = fromChat(history, sent, structuredClone(sent.chat));
  back.forEach((msg, i) => assert.equal(msg, history[i]));
});

test("fromChat applies changed text and keeps every other field of the original", () => {
  const sent = toChat(history);
  const answer = structuredClone(sent.chat);
  answer[2].content[0].text = "line\n[lightmem2: archived as abc]";
  answer[0].content = "[<TIMESTAMP>] read big.log";
  const back = fromChat(history, sent, answer);
  assert.equal(back[2].content[0].text, "line\n[lightmem2: archived as abc]");
  assert.deepEqual(back[2].content[1], history[2].content[1]);
  assert.equal(back[2].toolCallId, "call_1");
  assert.equal(back[0].content, "[<TIMESTAMP>] read big.log");
  assert.equal(back[0].timestamp, 1);
  assert.equal(back[1], history[1]);
  assert.equal(back[3], history[3]);
});

test("fromChat returns the input when the answer does not line up", () => {
  const sent = toChat(history);
  assert.equal(fromChat(history, sent, sent.chat.slice(1)), history);
  assert.equal(fromChat(history, sent, null), history);
});

// two goals: task 1 (a read and its answer) finished when the user asked again
const tasks = [
  { role: "user", content: "read big.log", timestamp: 1 },
  ...history.slice(1, 3),
  { role: "assistant", content: [{ type: "text", text: "I read it." }], api: "openai-completions", provider: "fake", model: "fake-model", usage, stopReason: "stop", timestamp: 4 },
  { role: "user", content: "now count the lines", timestamp: 5 },
  {
    role: "assistant",
    content: [{ type: "toolCall", id: "call_2", name: "exec", arguments: { command: "wc -l big.log" } }],
    api: "openai-completions",
    provider: "fake",
    model: "fake-model",
    usage,
    stopReason: "toolUse",
    timestamp: 6,
  },
  { role: "toolResult", toolCallId: "call_2", toolName: "exec", content: [{ type: "text", text: "10 big.log" }], isError: false, timestamp: 7 },
];
const SUMMARY = "[lightmem2: task 1 finished; its 3 messages (1 tool calls) archived as " + "ab".repeat(16) + "; ...]";

/** The sidecar's answer for `tasks` with task 1 (chat 1-3) collapsed and call_2's output reduced. */
function collapsedAnswer(sent) {
  const answer = structuredClone(sent.chat);
  answer.splice(1, 3, { role: "assistant", content: SUMMARY });
  answer[4].content[0].text = "10 big.log [reduced]";
  return answer;
}

test("fromChat replaces a collapsed range by one assistant message in OpenClaw's shape", () => {
  const sent = toChat(tasks);
  assert.equal(sent.chat.length, 7);
  const back = fromChat(tasks, sent, collapsedAnswer(sent), [{ first: 1, last: 3 }]);
  assert.equal(back.length, 5);
  assert.equal(back[0], tasks[0]);
  assert.deepEqual(back[1], {
    role: "assistant",
    content: [{ type: "text", text: SUMMARY }],
    api: "openai-completions",
    provider: "fake",
    model: "fake-model",
    usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
    stopReason: "stop",
    timestamp: 4,
  });
  assert.equal(back[2], tasks[4]);
  assert.equal(back[3], tasks[5]);
  assert.equal(back[4].content[0].text, "10 big.log [reduced]");
  assert.equal(back[4].toolCallId, "call_2");
  // no tool result is left without its call
  const calls = new Set(back.flatMap((m) => (m.role === "assistant" ? m.content.filter((b) => b.type === "toolCall").map((b) => b.id) : [])));
  assert.ok(back.filter((m) => m.role === "toolResult").every((m) => calls.has(m.toolCallId)));
  // the chat form of the result is what the sidecar answered
  const expected = collapsedAnswer(sent);
  expected[1].content = [{ type: "text", text: SUMMARY }];
  assert.deepEqual(toChat(back).chat, expected);
});

test("fromChat applies a finished task's shortened request together with its collapse", () => {
  const sent = toChat(tasks);
  const answer = collapsedAnswer(sent);
  const short = "read big.log\n[lightmem2: the rest of this request (40 chars) left with task 1, archived as " + "ab".repeat(16) + "]";
  answer[0].content = short;
  const back = fromChat(tasks, sent, answer, [{ first: 1, last: 3 }]);
  assert.equal(back.length, 5);
  assert.equal(back[0].content, short);
  assert.equal(back[0].role, "user");
  assert.equal(back[0].timestamp, tasks[0].timestamp);
  assert.equal(back[1].content[0].text, SUMMARY);
  assert.equal(back[2], tasks[4]);
});

// three answers with signed thinking: before a change lightmem2 made (chat 4, the reduced output), and after
const thought = (text, sig) => ({ type: "thinking", thinking: text, thinkingSignature: sig });
const thinkingTurns = [
  { role: "user", content: "read big.log", timestamp: 1 },
  { ...history[1], content: [thought("read it first", "s1"), ...history[1].content] },
  history[2],
  { role: "assistant", content: [thought("it is long", "s2"), { type: "text", text: "I read it." }], api: "anthropic-messages", provider: "anthropic", model: "claude-sonnet-5-5", usage, stopReason: "stop", timestamp: 4 },
  { role: "user", content: "again", timestamp: 5 },
  { role: "assistant", content: [thought("nothing to say", "s3")], api: "anthropic-messages", provider: "anthropic", model: "claude-sonnet-5-5", usage, stopReason: "stop", timestamp: 6 },
  { role: "user", content: "and now?", timestamp: 7 },
  { role: "assistant", content: [thought("fresh", "s4"), { type: "text", text: "Done." }], api: "anthropic-messages", provider: "anthropic", model: "claude-sonnet-5-5", usage, stopReason: "stop", timestamp: 8 },
];

test("fromChat drops the thinking of the answers the sidecar names, and nothing else", () => {
  const sent = toChat(thinkingTurns);
  assert.equal(sent.chat.length, 8);
  const answer = structuredClone(sent.chat);
  answer[2].content[0].text = "reduced";
  // chat 2..5 changed or came after the change; chat 7 was produced after it
  const back = fromChat(thinkingTurns, sent, answer, undefined, [{ start: 2, end: 6 }]);
  assert.equal(back[1], thinkingTurns[1], "an answer before the change keeps its thinking");
  assert.equal(back[2].content[0].text, "reduced");
  assert.deepEqual(back[3].content, [{ type: "text", text: "I read it." }]);
  assert.equal(back[3].timestamp, 4);
  assert.equal(back[3].model, "claude-sonnet-5-5");
  // the answer that was only thinking leaves whole: the user's next message follows
  assert.deepEqual(back.map((m) => m.role), ["user", "assistant", "toolResult", "assistant", "user", "user", "assistant"]);
  assert.equal(back[6], thinkingTurns[7], "an answer after the change keeps its thinking");
  // the transcript itself is untouched
  assert.equal(thinkingTurns[3].content[0].type, "thinking");
  // ranges that do not fit what was sent are ignored, never guessed at
  assert.equal(fromChat(thinkingTurns, sent, answer, undefined, [{ start: 2, end: 99 }])[3], thinkingTurns[3]);
  assert.deepEqual(fromChat(thinkingTurns, sent, answer, undefined, undefined)[3], thinkingTurns[3]);
});

test("modelOf prefers the model OpenClaw names, else the newest reply's", () => {
  assert.equal(modelOf({ model: "claude-opus-5-5" }, thinkingTurns), "claude-opus-5-5");
  assert.equal(modelOf({}, thinkingTurns), "claude-sonnet-5-5");
  assert.equal(modelOf({}, [{ role: "user", content: "hi" }]), null);
});

test("fromChat keeps a message it did not send and maps the messages after a range", () => {
  const withCustom = [...tasks.slice(0, 5), { role: "compactionSummary", summary: "x", tokensBefore: 1, timestamp: 5 }, ...tasks.slice(5)];
  const sent = toChat(withCustom);
  const back = fromChat(withCustom, sent, collapsedAnswer(sent), [{ first: 1, last: 3 }]);
  assert.deepEqual(back.map((m) => m.role), ["user", "assistant", "user", "compactionSummary", "assistant", "toolResult"]);
  assert.equal(back[2], withCustom[4]);
  assert.equal(back[3], withCustom[5]);
  assert.equal(back[4], withCustom[6]);
  assert.equal(back[5].content[0].text, "10 big.log [reduced]");
});

test("fromChat returns the input when a collapse does not line up", () => {
  const sent = toChat(tasks);
  const answer = collapsedAnswer(sent);
  const cases = [
    [answer, undefined], // shorter without ranges
    [answer, [{ first: 1, last: 2 }]], // length does not match the ranges
    [answer, [{ first: 1, last: 3 }, { first: 2, last: 3 }]], // overlapping
    [answer, [{ first: 1.5, last: 3 }]],
    [answer, [{ first: 6, last: 8 }]], // past the end
    [answer, "1-3"],
    [[answer[0], answer[1], answer[4]], [{ first: 1, last: 5 }]], // call_2 would leave, its result stay
  ];
  for (const [back, collapsed] of cases) assert.equal(fromChat(tasks, sent, back, collapsed), tasks, JSON.stringify(collapsed));
  const withCalls = structuredClone(answer);
  withCalls[1].tool_calls = [{ id: "x", type: "function", function: { name: "read", arguments: "{}" } }];
  assert.equal(fromChat(tasks, sent, withCalls, [{ first: 1, last: 3 }]), tasks);
  const asUser = structuredClone(answer);
  asUser[1].role = "user";
  assert.equal(fromChat(tasks, sent, asUser, [{ first: 1, last: 3 }]), tasks);
  // a range over a message that was not sent: that message must not vanish
  const withCustom = [...tasks.slice(0, 2), { role: "compactionSummary", summary: "x", tokensBefore: 1, timestamp: 2 }, ...tasks.slice(2)];
  const sentCustom = toChat(withCustom);
  assert.equal(fromChat(withCustom, sentCustom, collapsedAnswer(sentCustom), [{ first: 1, last: 3 }]), withCustom);
  // an empty list of ranges is the one-for-one mapping
  assert.equal(fromChat(tasks, sent, structuredClone(sent.chat), [])[6], tasks[6]);
});

test("tool-result blocks round-trip through the sidecar output form", () => {
  const content = history[2].content;
  const out = resultToOutput(content);
  assert.deepEqual(out[1], { type: "openclaw_opaque" });
  out[0] = { type: "text", text: "short" };
  const back = resultFromOutput(content, out);
  assert.equal(back[0].text, "short");
  assert.equal(back[1], content[1]);
  assert.equal(resultFromOutput(content, out.slice(1)), content);
});

test("hostSettings fills defaults and keeps given values", () => {
  assert.equal(hostSettings(undefined).port, null); // lightmem2's own server.port, read at start
  assert.equal(hostSettings({ openclaw: { port: 9 } }).port, 9);
  assert.equal(hostSettings({ openclaw: { command: "/x/lightmem2", port: 9 } }).command, "/x/lightmem2");
  assert.equal(hostSettings({ openclaw: { autoStart: false } }).autoStart, false);
});

function fakeApi(pluginConfig) {
  const api = {
    registrationMode: "full",
    pluginConfig,
    config: { plugins: { entries: { lightmem2: { config: { mode: "aggressive", ...pluginConfig } } } } },
    logger: { warn() {}, debug() {}, info() {} },
    got: { hooks: {} },
    registerService: (s) => (api.got.service = s),
    registerContextEngine: (id, factory) => (api.got.engine = factory({})),
    registerAgentToolResultMiddleware: (fn, opts) => ((api.got.middleware = fn), (api.got.middlewareOpts = opts)),
    on: (name, fn) => (api.got.hooks[name] = fn),
    registerCommand: (c) => (api.got.command = c),
    registerTool: (t) => (api.got.tool = t),
  };
  return api;
}

async function freePort() {
  const server = createServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

test("every hook fails open when the sidecar cannot start", async () => {
  const port = await freePort();
  const api = fakeApi({ openclaw: { command: "/nonexistent/lightmem2", port, startTimeoutMs: 2000 } });
  plugin.register(api);
  const { engine, middleware, hooks, command, tool } = api.got;
  assert.equal(engine.info.id, "lightmem2");
  assert.equal(engine.info.transcriptSemantics.currentTurnFence, "before-current-turn-entry-v1");
  assert.deepEqual(api.got.middlewareOpts, { runtimes: ["openclaw"] });
  const started = Date.now();
  const assembled = await engine.assemble({ sessionId: "s", messages: history });
  assert.equal(assembled.messages, history);
  assert.ok(assembled.estimatedTokens > 0);
  const event = { toolName: "read", toolCallId: "c", args: {}, result: { content: [{ type: "text", text: "x" }] } };
  assert.equal(await middleware(event, { sessionId: "s" }), undefined);
  assert.equal(hooks.tool_result_persist({ toolCallId: "c", message: history[2] }), undefined);
  assert.equal(await hooks.before_tool_call({ toolName: "read", params: { path: "<WORKDIR>/a" } }, {}), undefined);
  assert.ok(Date.now() - started < 5000, "a failed start is not retried on every hook");
  assert.deepEqual(await engine.commitTurn({ advancementKey: "k1", messages: [] }), { status: "committed" });
  assert.deepEqual(await engine.commitTurn({ advancementKey: "k1", messages: [] }), { status: "duplicate" });
  const doctor = await command.handler({ args: "doctor" });
  assert.match(doctor.text, /\[fail\] openclaw plugin: sidecar unavailable \(cannot run \/nonexistent\/lightmem2/);
  assert.match(doctor.text, /fail-open/);
  const recovered = await tool.execute("id", { key: "0".repeat(32) });
  assert.match(recovered.content[0].text, /cannot run \/nonexistent\/lightmem2/);
});

test("a running sidecar is used as found, and its answers are applied", async () => {
  const cli = fakeCli();
  const { server, seen, port } = await fakeServe((req, res, data) => {
    if (req.url === "/sidecar/toolResult") return res.end(JSON.stringify({ output: [{ type: "text", text: "reduced" }] }));
    if (req.url === "/sidecar/command") return res.end(JSON.stringify({ text: `ran ${data.text}` }));
    if (req.url === "/sidecar/recover") return res.end(JSON.stringify({ text: "original bytes" }));
    if (req.url === "/sidecar/afterTurn") return res.end(JSON.stringify({ response: null, recorded: true }));
    res.statusCode = 404;
    res.end("{}");
  });
  try {
    const sidecar = new Sidecar(hostSettings({ openclaw: { port, autoStart: false, command: cli.exe } }));
    assert.equal(await sidecar.ensure(), true);
    assert.match(await sidecar.describe(), /^\[pass\] openclaw plugin: sidecar at http:\/\/127\.0\.0\.1:\d+ \(lightmem2 t, mode normal/);
    const api = fakeApi({ openclaw: { port, autoStart: false, command: cli.exe } });
    plugin.register(api);
    const { engine, middleware, hooks, command, tool } = api.got;
    const turn = [history[0], history[1], { role: "assistant", content: [], usage: { ...usage, input: 5, cacheRead: 95 } }];
    assert.deepEqual(await engine.commitTurn({ advancementKey: "t1", sessionId: "s", messages: turn }), { status: "committed" });
    await new Promise((r) => setTimeout(r, 200));
    const after = seen.find(({ url }) => url === "/sidecar/afterTurn");
    // one entry per model call, at its reply's place in the turn's chat form (not one sum per turn)
    const sentTurn = JSON.parse(after.body);
    assert.deepEqual(sentTurn.calls, [
      { at: 1, usage: { input_tokens: 10, cache_read_input_tokens: 90, cache_creation_input_tokens: 0, output_tokens: 2 } },
      { at: 2, usage: { input_tokens: 5, cache_read_input_tokens: 95, cache_creation_input_tokens: 0, output_tokens: 2 } },
    ]);
    assert.deepEqual(sentTurn.turn, toChat(turn).chat);
    assert.equal(sentTurn.sessionId, "s");
    assert.equal(sentTurn.api, "anthropic");
    const event = { toolName: "read", toolCallId: "c9", args: {}, result: { content: [{ type: "text", text: "long" }], details: { a: 1 } } };
    const out = await middleware(event, { sessionId: "s" });
    assert.deepEqual(out.result, { content: [{ type: "text", text: "reduced" }], details: { a: 1 } });
    const persisted = hooks.tool_result_persist({ toolCallId: "c9", message: { role: "toolResult", toolCallId: "c9", content: [{ type: "text", text: "long" }] } });
    assert.equal(persisted.message.content[0].text, "reduced");
    const other = { role: "toolResult", toolCallId: "c9", content: [{ type: "text", text: "another session's output" }] };
    assert.equal(hooks.tool_result_persist({ toolCallId: "c9", message: other }), undefined);
    assert.equal(await middleware({ ...event, toolName: "lightmem2_recover" }, {}), undefined);
    assert.equal((await command.handler({ args: "mode aggressive" })).text, "ran /lightmem2 mode aggressive");
    assert.equal((await tool.execute("id", { key: "k" })).content[0].text, "original bytes");
    // every call but the challenge probe carried the secret, and every POST was JSON
    for (const { url, headers } of seen) {
      if (headers[CHALLENGE_HEADER]) assert.equal(headers[SECRET_HEADER], undefined, "secret sent before the proof");
      else assert.equal(headers[SECRET_HEADER], SECRET, url);
      assert.equal(headers.origin, undefined);
    }
    assert.ok(seen.filter(({ url }) => url !== "/sidecar/health").every(({ headers }) => headers["content-type"] === "application/json"));
  } finally {
    server.close();
  }
});

test("a server that cannot prove the secret gets neither the secret nor a message", async () => {
  const cli = fakeCli();
  const { server, seen, port } = await fakeServe(() => assert.fail("a call reached the impostor"), "0".repeat(64));
  try {
    const api = fakeApi({ openclaw: { port, autoStart: false, command: cli.exe } });
    plugin.register(api);
    const { engine, command } = api.got;
    const assembled = await engine.assemble({ sessionId: "s", messages: history });
    assert.equal(assembled.messages, history); // fail-open: OpenClaw's own messages
    assert.deepEqual(seen.map(({ url }) => url), ["/sidecar/health"]);
    assert.equal(seen[0].headers[SECRET_HEADER], undefined);
    const doctor = await command.handler({ args: "doctor" });
    assert.match(doctor.text, /cannot prove it knows this install's secret/);
  } finally {
    server.close();
  }
});

test("a refused command shows the sidecar's reason and is not run through the CLI instead", async () => {
  const cli = fakeCli();
  const { server, port } = await fakeServe((req, res) => {
    res.statusCode = 403;
    res.end(JSON.stringify({ error: "--trace cannot be used from chat; run `lightmem2 resume --trace ...` in a terminal" }));
  });
  try {
    const api = fakeApi({ openclaw: { port, autoStart: false, command: cli.exe } });
    plugin.register(api);
    const text = (await api.got.command.handler({ args: "resume --trace /dev/zero" })).text;
    assert.equal(text, "lightmem2: --trace cannot be used from chat; run `lightmem2 resume --trace ...` in a terminal");
  } finally {
    server.close();
  }
});

test("a replaced secret file is read again once", async () => {
  const cli = fakeCli("1".repeat(64)); // the plugin first reads a stale value...
  const { server, seen, port } = await fakeServe((req, res) => res.end(JSON.stringify({ text: "ok" })));
  try {
    const sidecar = new Sidecar(hostSettings({ openclaw: { port, autoStart: false, command: cli.exe } }));
    await sidecar.loadSecret();
    sidecar.ready = true; // as if it had started before the file was replaced
    writeFileSync(join(cli.dir, "sidecar.secret"), `${SECRET}\n`); // ...then serve's current one appears
    assert.deepEqual(await sidecar.post("/sidecar/command", { text: "/lightmem2 status" }), { text: "ok" });
    assert.deepEqual(seen.map(({ headers }) => headers[SECRET_HEADER]), ["1".repeat(64), SECRET]);
  } finally {
    server.close();
  }
});

test("assemble hands OpenClaw the shorter list when the sidecar collapsed a task, else its own", async () => {
  const cli = fakeCli();
  let collapsed = [{ first: 1, last: 3 }];
  const { server, seen, port } = await fakeServe((req, res, data) => {
    if (req.url !== "/sidecar/assemble") return res.end("{}");
    res.end(JSON.stringify({ messages: collapsedAnswer({ chat: data.messages }), collapsed }));
  });
  try {
    const api = fakeApi({ openclaw: { port, autoStart: false, command: cli.exe } });
    plugin.register(api);
    const { engine } = api.got;
    const prompt = "[Mon 2026-11-30 07:00 UTC] now update the changelog";
    const got = await engine.assemble({ sessionId: "s2", messages: tasks, tokenBudget: 95_000.5, prompt });
    assert.deepEqual(got.messages.map((m) => m.role), ["user", "assistant", "user", "assistant", "toolResult"]);
    assert.equal(got.messages[1].content[0].text, SUMMARY);
    assert.equal(got.estimatedTokens, estimateTokens(got.messages));
    assert.ok(got.estimatedTokens < estimateTokens(tasks));
    const body = JSON.parse(seen.find(({ url }) => url === "/sidecar/assemble").body);
    assert.deepEqual(body.messages, toChat(tasks).chat);
    assert.equal(body.api, "chat"); // its replies came from an openai-completions provider
    assert.equal(body.tokenBudget, 95_000); // the threshold aggressive mode compacts under
    assert.equal(body.prompt, prompt); // read for a new goal, never sent back
    collapsed = [{ first: 1, last: 2 }]; // does not fit the answer: OpenClaw's own messages
    assert.equal((await engine.assemble({ sessionId: "s2", messages: tasks })).messages, tasks);
    const unbudgeted = JSON.parse(seen.filter(({ url }) => url === "/sidecar/assemble").at(-1).body);
    assert.equal(unbudgeted.tokenBudget, undefined); // not told: the sidecar keeps its table
    assert.equal(unbudgeted.prompt, undefined);
  } finally {
    server.close();
  }
});

test("the provider's wire API is read from the newest reply that names one", () => {
  const reply = (api) => ({ role: "assistant", content: [], ...(api ? { api } : {}) });
  assert.equal(wireApiOf([{ role: "user", content: "hi" }]), null); // no reply yet: the sidecar assumes a prefix cache
  assert.equal(wireApiOf([reply("anthropic-messages"), { role: "toolResult" }]), "anthropic");
  assert.equal(wireApiOf([reply("anthropic-messages"), reply("openai-completions")]), "chat"); // the newest
  assert.equal(wireApiOf([reply("openai-codex-responses"), reply()]), "responses");
  assert.equal(wireApiOf([reply("google-generative-ai")]), null); // none the sidecar prices
  // OpenClaw's own answer to a chat command never went to the provider: the reply before it decides
  const own = { ...reply("openai-responses"), provider: "openclaw", model: "gateway-injected" };
  assert.equal(wireApiOf([reply("anthropic-messages"), own]), "anthropic");
});

test("without a port in openclaw.json the sidecar is looked for on lightmem2's own server.port", async () => {
  const { server, port } = await fakeServe((req, res) => res.end("{}"));
  try {
    const cli = fakeCli(SECRET, port); // `lightmem2 config sidecar` names the port serve listens on
    const sidecar = new Sidecar(hostSettings({ openclaw: { autoStart: false, command: cli.exe } }));
    assert.equal(await sidecar.ensure(), true, sidecar.lastError);
    assert.equal(sidecar.base, `http://127.0.0.1:${port}`);
    assert.match(await sidecar.describe(), new RegExp(`sidecar at http://127\\.0\\.0\\.1:${port} `));
  } finally {
    server.close();
  }
});

test("lightmem2's keys written in openclaw.json go to its config file, and a refusal shows in doctor", async () => {
  const { server, port } = await fakeServe((req, res) => res.end("{}"));
  try {
    const cli = fakeCli(SECRET, port);
    const config = { mode: "aggressive", reduction: { normal: { triggerChars: 5000 } }, openclaw: { autoStart: false, command: cli.exe } };
    const sidecar = new Sidecar(hostSettings(config));
    assert.equal(await sidecar.ensure(), true, sidecar.lastError);
    const args = readFileSync(join(cli.dir, "args.log"), "utf8").trim().split("\n");
    assert.deepEqual(args, [`config sidecar --merge ${JSON.stringify({ mode: "aggressive", reduction: { normal: { triggerChars: 5000 } } })}`]);
    assert.equal(hostSettings({ openclaw: { port: 1 } }).lightmem2Keys, null); // nothing of ours: no --merge

    const refusing = fakeCli(SECRET, port, '"mergeError": "mode = \\"turbo\\" is invalid", ');
    const bad = new Sidecar(hostSettings({ mode: "turbo", openclaw: { autoStart: false, command: refusing.exe } }));
    assert.equal(await bad.ensure(), true, bad.lastError); // still runs, on the file's own config
    assert.match(await bad.describe(), /\n\[fail\] openclaw\.json: plugins\.entries\.lightmem2\.config mode = "turbo" is invalid; fix/);
  } finally {
    server.close();
  }
});

/**
 * The adapter copied into `n` fresh folders, as OpenClaw does: the Gateway of 2026.9.6 evaluates the
 * plugin from more than one copy of the package in one process, so each copy is a module of its own.
 */
function adapterCopies(n) {
  const here = new URL("..", import.meta.url).pathname;
  const root = mkdtempSync(join(tmpdir(), "lightmem2-copies-"));
  return Array.from({ length: n }, (_, i) => {
    const dir = join(root, `copy-${i}`);
    for (const name of ["index.js", "package.json", "lib"]) cpSync(join(here, name), join(dir, name), { recursive: true });
    return join(dir, "index.js");
  });
}

/** Run `code` (an ES module, `copies` holding the adapter copies' paths) in a fresh node; its stdout. */
function inFreshNode(code, copies) {
  const dir = mkdtempSync(join(tmpdir(), "lightmem2-node-"));
  const script = join(dir, "run.mjs");
  writeFileSync(script, `const copies = ${JSON.stringify(copies)};\n${code}`);
  return execFileSync(process.execPath, [script], { encoding: "utf8", timeout: 30000 });
}

const SILENT_API = `
function api(pluginConfig) {
  const noop = () => {};
  const got = {};
  return {
    got, pluginConfig, registrationMode: "full", logger: { warn: noop, debug: noop, info: noop },
    registerService: (s) => (got.service = s), registerContextEngine: noop, registerAgentToolResultMiddleware: noop,
    on: noop, registerCommand: noop, registerTool: noop,
  };
}`;

test("one exit hook per process, however often and from however many copies the plugin is loaded", () => {
  // measured on OpenClaw 2026.9.6 before: every copy of the module added its own process.once("exit")
  // (one per sidecar it made), and on top of OpenClaw's own nine or ten the Gateway logged
  // MaxListenersExceededWarning at every start
  const cli = fakeCli();
  const out = inFreshNode(
    `${SILENT_API}
const warnings = [];
process.on("warning", (w) => warnings.push(w.name));
// OpenClaw's own exit listeners reach the limit by themselves (10 at a Gateway start on existing state)
while (process.listenerCount("exit") < process.getMaxListeners()) process.once("exit", () => {});
const before = process.listenerCount("exit");
const limit = process.getMaxListeners();
for (const path of copies) {
  const plugin = (await import(path)).default;
  for (let i = 0; i < 12; i++) {
    // the same settings again (each load mode registers), and other ports (a config changed in-process)
    plugin.register(api({ openclaw: { command: ${JSON.stringify(cli.exe)}, port: 40000 + (i % 4), autoStart: false } }));
  }
}
await new Promise((r) => setImmediate(r));
const raised = process.getMaxListeners() - limit;
console.log(JSON.stringify({ added: process.listenerCount("exit") - before, raised, warnings }));`,
    adapterCopies(3),
  );
  const { added, raised, warnings } = JSON.parse(out);
  assert.deepEqual(warnings, []);
  assert.equal(added, 1); // one hook for every sidecar of every copy
  assert.equal(raised, 1); // and the limit raised by that one only
});

test("the copies share one sidecar: serve is started once, and stopped when OpenClaw exits", async () => {
  const cli = fakeCli();
  const pidFile = join(cli.dir, "serve.pid");
  // `serve` of this lightmem2 stays up without ever answering, and says who it is
  writeFileSync(
    cli.exe,
    `#!/bin/sh\nprintf '%s\\n' "$*" >> "${join(cli.dir, "args.log")}"\n` +
      `if [ "$1 $2" = "config sidecar" ]; then echo '{"port": ${await freePort()}, "secretPath": "${join(cli.dir, "sidecar.secret")}"}'; ` +
      `elif [ "$1" = "serve" ]; then echo $$ >> "${pidFile}"; exec sleep 60; fi\n`,
  );
  inFreshNode(
    `${SILENT_API}
import { existsSync } from "node:fs";
for (const path of copies) {
  const plugin = (await import(path)).default;
  const a = api({ openclaw: { command: ${JSON.stringify(cli.exe)}, startTimeoutMs: 20000 } });
  plugin.register(a);
  a.got.service.start();
}
const deadline = Date.now() + 10000;
while (!existsSync(${JSON.stringify(pidFile)}) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
await new Promise((r) => setTimeout(r, 300)); // time for a second copy to start one of its own
process.exit(0); // as OpenClaw does: the exit hook stops the sidecar it started`,
    adapterCopies(2),
  );
  const pids = readFileSync(pidFile, "utf8").trim().split("\n").map(Number);
  assert.equal(pids.length, 1, `serve started ${pids.length} times`);
  const alive = () => {
    try {
      process.kill(pids[0], 0);
      return true;
    } catch {
      return false;
    }
  };
  const deadline = Date.now() + 5000;
  while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(alive(), false, "serve outlived OpenClaw");
});

test("while the sidecar is down a command's answer comes from the CLI, after saying OpenClaw runs without lightmem2", async () => {
  // measured before on OpenClaw 2026.9.6 with a typo in config.json and serve's port taken: /lightmem2
  // status gave the CLI's "config in force: last good (mode normal ...)" alone, as if that config ran
  const cli = fakeCli(SECRET, await freePort()); // nothing listens there, and autoStart is off
  const api = fakeApi({ openclaw: { autoStart: false, command: cli.exe } });
  plugin.register(api);
  const text = (await api.got.command.handler({ args: "status" })).text;
  const [first, ...rest] = text.split("\n");
  assert.match(first, /^lightmem2 is not active in OpenClaw: its sidecar is unavailable \(not running at http:\/\/127\.0\.0\.1:\d+ and openclaw\.autoStart is false\); OpenClaw runs unmodified \(fail-open\)/);
  assert.deepEqual(rest, ["cli ran status"]);
  const doctor = (await api.got.command.handler({ args: "doctor" })).text; // doctor has its own line for it
  assert.doesNotMatch(doctor, /not active in OpenClaw/);
  assert.match(doctor, /^\[fail\] openclaw plugin: sidecar unavailable/);
});

test("a config file lightmem2 rejected is logged once, with the config in force", async () => {
  const extra = '"configError": "config.json: mode = \\"turbo\\" is invalid; in force: last good (mode normal)", ';
  const { server, port } = await fakeServe((req, res) => res.end("{}"));
  try {
    const cli = fakeCli(SECRET, port, extra);
    const warned = [];
    const sidecar = new Sidecar(hostSettings({ openclaw: { autoStart: false, command: cli.exe } }), { warn: (m) => warned.push(m) });
    assert.equal(await sidecar.ensure(), true, sidecar.lastError); // on the port `config sidecar` named
    await sidecar.loadSecret(true);
    assert.deepEqual(warned, ['lightmem2: config file rejected: config.json: mode = "turbo" is invalid; in force: last good (mode normal)']);
  } finally {
    server.close();
  }
});

test("after a compaction assemble adds lightmem2's note to the summary; compact archives the history first", async () => {
  const cli = fakeCli();
  const { server, seen, port } = await fakeServe((req, res, data) => {
    if (req.url === "/sidecar/assemble") return res.end(JSON.stringify({ messages: data.messages }));
    if (req.url === "/sidecar/compacted") return res.end(JSON.stringify({ note: `NOTE for ${data.summary}` }));
    if (req.url === "/sidecar/precompact") return res.end(JSON.stringify({ archived: 1, conversation: "ef".repeat(16) }));
    res.end("{}");
  });
  try {
    const api = fakeApi({ openclaw: { port, autoStart: false, command: cli.exe } });
    plugin.register(api);
    const { engine } = api.got;
    const got = await engine.assemble({ sessionId: "s3", messages: history });
    assert.equal(got.messages[3].summary, "earlier work\n\nNOTE for earlier work");
    assert.equal(got.messages[3].tokensBefore, 100);
    assert.equal(history[3].summary, "earlier work"); // OpenClaw's own list is not changed
    assert.equal(got.estimatedTokens, estimateTokens(got.messages));
    const again = await engine.assemble({ sessionId: "s3", messages: history });
    assert.deepEqual(again.messages, got.messages); // the same bytes every turn
    assert.equal(seen.filter(({ url }) => url === "/sidecar/compacted").length, 1);
    // compact() archives what was last assembled, then hands over to the runtime (not installed here:
    // its import fails, which OpenClaw itself never sees)
    await engine.compact({ sessionId: "s3", sessionKey: "k" }).catch(() => null);
    const pre = JSON.parse(seen.find(({ url }) => url === "/sidecar/precompact").body);
    assert.deepEqual(pre, { sessionId: "s3", messages: toChat(history).chat });
  } finally {
    server.close();
  }
});
