// OpenClaw transcript messages <-> the OpenAI chat form the lightmem2 sidecar speaks.
//
// Why a mapping and not a copy: the sidecar transforms content (tool outputs, the stabilised head,
// the tail block) but never adds or reorders messages, so each message that goes out comes back at
// the same position. We send only what the sidecar may change and rebuild every OpenClaw message from
// its original, so provider metadata (usage, signatures, thinking blocks, timestamps) survives
// untouched. Messages the chat form cannot carry (compaction summaries, custom entries) are not sent
// and come back as they were.
//
// The one change in length: in aggressive mode a finished task (every assistant and tool-result
// message between two user goals) leaves the context as one assistant message, its summary. The
// sidecar then names the collapsed ranges of what we sent (`collapsed: [{first, last}]`, inclusive
// chat indices); each becomes one OpenClaw assistant message carrying the summary text, in the shape
// of the range's own assistant messages. Anything that does not line up (a range over a message we
// did not send, a tool result whose call would leave without it, an answer of the wrong length) gives
// back the input unchanged: fail-open.
//
// Thinking: the chat form carries none, so the sidecar names the ranges (`thinking: [{start, end}]`)
// whose answers must go without it (a change lightmem2 made to the history before them, on a model
// that binds thinking to that history; the answers a compaction left behind), and they are dropped here.

/** A data URL for an OpenClaw image block. */
function dataUrl(part) {
  return `data:${part.mimeType || "application/octet-stream"};base64,${part.data || ""}`;
}

/** OpenClaw content (a string or blocks) -> chat content (a string or parts). */
function contentToChat(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part) => {
    if (part && part.type === "text") return { type: "text", text: String(part.text ?? "") };
    if (part && part.type === "image") return { type: "image_url", image_url: { url: dataUrl(part) } };
    return { type: "openclaw_opaque" };
  });
}

/** Chat content back to OpenClaw blocks, reusing the original block where the sidecar kept it. */
function contentFromChat(chat, original) {
  if (typeof chat === "string") {
    if (typeof original === "string") return chat;
    return [{ type: "text", text: chat }];
  }
  if (!Array.isArray(chat)) return original;
  const before = Array.isArray(original) ? original : [{ type: "text", text: String(original ?? "") }];
  return chat.map((part, i) => {
    const old = before[i];
    if (part && part.type === "text") {
      return old && old.type === "text" ? { ...old, text: part.text } : { type: "text", text: part.text };
    }
    if (part && part.type === "image_url" && typeof part.image_url?.url === "string") {
      const match = /^data:([^;,]+);base64,(.*)$/s.exec(part.image_url.url);
      if (old && old.type === "image" && match && match[2] === old.data && match[1] === old.mimeType) return old;
      if (match) return { type: "image", mimeType: match[1], data: match[2] };
    }
    return old ?? part;
  });
}

/** One OpenClaw message -> one chat message, or null when the chat form cannot carry it. */
export function messageToChat(msg) {
  if (!msg || typeof msg !== "object") return null;
  if (msg.role === "user") return { role: "user", content: contentToChat(msg.content) };
  if (msg.role === "toolResult") {
    return { role: "tool", tool_call_id: String(msg.toolCallId ?? ""), content: contentToChat(msg.content) };
  }
  if (msg.role === "assistant") {
    const blocks = Array.isArray(msg.content) ? msg.content : [];
    const texts = blocks.filter((b) => b && b.type === "text").map((b) => ({ type: "text", text: String(b.text ?? "") }));
    const calls = blocks
      .filter((b) => b && b.type === "toolCall")
      .map((b) => ({
        id: String(b.id ?? ""),
        type: "function",
        function: { name: String(b.name ?? ""), arguments: JSON.stringify(b.arguments ?? {}) },
      }));
    const out = { role: "assistant", content: texts.length ? texts : null };
    if (calls.length) out.tool_calls = calls;
    return out;
  }
  return null;
}

/**
 * The wire API of the provider this session's model calls go to, as the sidecar names it
 * ("anthropic" | "chat" | "responses"), from the newest assistant message's `api` (OpenClaw stamps
 * each reply with it: "anthropic-messages", "openai-completions", "openai-responses", ...); null when
 * no reply says or the API is none of those. The sidecar prices an eviction's cache break by it:
 * Anthropic's cache re-writes every message after a break, a prefix cache only what follows it.
 */
export function wireApiOf(messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    const msg = messages[i];
    // OpenClaw's own replies (a chat command's answer, a transcript mirror) carry its provider
    // "openclaw" and an api of their own ("openai-responses"): they never went to the model's provider
    const api = msg?.role === "assistant" && msg.provider !== "openclaw" ? msg.api : undefined;
    if (typeof api !== "string") continue;
    if (api === "anthropic-messages") return "anthropic";
    if (api === "openai-completions") return "chat";
    if (api.endsWith("-responses")) return "responses";
    return null;
  }
  return null;
}

/**
 * The model this turn's calls go to: the one OpenClaw names to the engine, else the newest reply's
 * (a model id such as "claude-sonnet-5-5"); null when neither says.
 */
export function modelOf(params, messages) {
  if (typeof params?.model === "string" && params.model) return params.model;
  for (let i = messages.length - 1; i >= 0; i--) {
    const msg = messages[i];
    if (msg?.role === "assistant" && msg.provider !== "openclaw" && typeof msg.model === "string") return msg.model;
  }
  return null;
}

/** The chat messages to send and, for each, the index of the OpenClaw message it came from. */
export function toChat(messages) {
  const chat = [];
  const index = [];
  messages.forEach((msg, i) => {
    const c = messageToChat(msg);
    if (c !== null) {
      chat.push(c);
      index.push(i);
    }
  });
  return { chat, index };
}

function assistantFromChat(original, sent, back) {
  if (JSON.stringify(sent) === JSON.stringify(back)) return original;
  const texts = Array.isArray(back.content) ? back.content.filter((p) => p && p.type === "text") : [];
  if (typeof back.content === "string") texts.push({ type: "text", text: back.content });
  const calls = Array.isArray(back.tool_calls) ? back.tool_calls : [];
  let t = 0;
  let c = 0;
  const content = (original.content || []).map((block) => {
    if (block && block.type === "text" && t < texts.length) return { ...block, text: texts[t++].text };
    if (block && block.type === "toolCall" && c < calls.length) {
      const call = calls[c++];
      try {
        return { ...block, arguments: JSON.parse(call.function.arguments) };
      } catch {
        return block;
      }
    }
    return block;
  });
  return { ...original, content };
}

/** One chat message back onto the OpenClaw message it was made from (the original if unchanged). */
export function messageFromChat(original, sent, back) {
  if (!back || typeof back !== "object" || back.role !== sent.role) return original;
  if (JSON.stringify(sent) === JSON.stringify(back)) return original;
  if (original.role === "assistant") return assistantFromChat(original, sent, back);
  return { ...original, content: contentFromChat(back.content, original.content) };
}

/** The summary text of a chat message the sidecar put in place of a collapsed range, or null. */
function summaryText(back) {
  if (!back || typeof back !== "object" || back.role !== "assistant" || back.tool_calls?.length) return null;
  let text = null;
  if (typeof back.content === "string") text = back.content;
  else if (Array.isArray(back.content) && back.content.every((p) => p && p.type === "text" && typeof p.text === "string")) {
    text = back.content.map((p) => p.text).join("");
  }
  return text ? text : null;
}

/** The collapsed ranges as [first, last] pairs when they fit what was sent and answered, else null. */
function checkRanges(collapsed, sent, back) {
  if (collapsed === undefined || collapsed === null) return back.length === sent.chat.length ? [] : null;
  if (!Array.isArray(collapsed)) return null;
  const ranges = [];
  let prev = -1;
  let dropped = 0;
  for (const r of collapsed) {
    const first = r?.first;
    const last = r?.last;
    if (!Number.isInteger(first) || !Number.isInteger(last) || first <= prev || last < first) return null;
    if (last >= sent.chat.length) return null;
    // a message we did not send inside the range (a compaction summary, a custom entry) must stay
    if (sent.index[last] - sent.index[first] !== last - first) return null;
    ranges.push([first, last]);
    dropped += last - first;
    prev = last;
  }
  if (back.length !== sent.chat.length - dropped) return null;
  // a tool result and its call leave together or stay together
  const inside = new Set();
  ranges.forEach(([first, last]) => {
    for (let k = first; k <= last; k++) inside.add(k);
  });
  const callAt = new Map();
  sent.chat.forEach((m, k) => (m.tool_calls || []).forEach((c) => callAt.set(c.id, k)));
  for (let k = 0; k < sent.chat.length; k++) {
    const m = sent.chat[k];
    if (m.role !== "tool") continue;
    const at = callAt.get(m.tool_call_id);
    if (at !== undefined && inside.has(at) !== inside.has(k)) return null;
  }
  return ranges;
}

const NO_USAGE = Object.freeze({
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: Object.freeze({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }),
});

/** The OpenClaw assistant message standing for a collapsed range: its own provider and model. */
function summaryMessage(range, text) {
  const model = [...range].reverse().find((m) => m && m.role === "assistant") || {};
  const last = range[range.length - 1] || {};
  const out = { role: "assistant", content: [{ type: "text", text }] };
  for (const key of ["api", "provider", "model"]) if (model[key] !== undefined) out[key] = model[key];
  out.usage = structuredClone(NO_USAGE);
  out.stopReason = "stop";
  out.timestamp = model.timestamp ?? last.timestamp ?? 0;
  return out;
}

/**
 * The OpenClaw indices of the messages the sidecar's `thinking` ranges name (`{start, end}`, end
 * exclusive, indices of the chat messages sent), or an empty set when there are none or they do not
 * fit what was sent.
 */
function thoughtless(thinking, sent) {
  const out = new Set();
  if (!Array.isArray(thinking)) return out;
  for (const r of thinking) {
    const start = r?.start;
    const end = r?.end;
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > sent.chat.length) return new Set();
    for (let k = start; k < end; k++) out.add(sent.index[k]);
  }
  return out;
}

/**
 * An assistant message without its thinking blocks (signed, or redacted), or null when nothing else is
 * left of it. Why: on a model that binds each thinking block to the history before it, a block whose
 * history lightmem2 changed makes the provider reject the whole request; OpenClaw sends every earlier
 * answer's thinking back, and its provider calls do not pass lightmem2's proxy.
 */
export function withoutThinking(msg) {
  if (!msg || msg.role !== "assistant" || !Array.isArray(msg.content)) return msg;
  const content = msg.content.filter((b) => !(b && (b.type === "thinking" || b.type === "redacted_thinking")));
  if (content.length === msg.content.length) return msg;
  return content.length ? { ...msg, content } : null;
}

/**
 * The OpenClaw message list with the sidecar's answer applied; the input itself if shapes differ.
 * `collapsed` is the answer's list of ranges that became one summary message each (absent: none);
 * `thinking` the ranges whose answers go without their thinking (absent: none).
 */
export function fromChat(messages, sent, back, collapsed, thinking) {
  if (!Array.isArray(back)) return messages;
  const ranges = checkRanges(collapsed, sent, back);
  if (ranges === null) return messages;
  const drop = thoughtless(thinking, sent);
  const start = new Map(ranges.map(([first, last]) => [sent.index[first], [first, last]]));
  const chatAt = new Map(sent.index.map((i, k) => [i, k]));
  const out = [];
  let shift = 0; // chat messages the ranges so far removed from the answer
  for (let i = 0; i < messages.length; i++) {
    const range = start.get(i);
    if (range) {
      const [first, last] = range;
      const text = summaryText(back[first - shift]);
      if (text === null) return messages;
      out.push(summaryMessage(messages.slice(i, sent.index[last] + 1), text));
      i = sent.index[last];
      shift += last - first;
      continue;
    }
    const k = chatAt.get(i);
    const msg = k === undefined ? messages[i] : messageFromChat(messages[i], sent.chat[k], back[k - shift]);
    const kept = drop.has(i) ? withoutThinking(msg) : msg;
    if (kept !== null) out.push(kept);
  }
  return out;
}

/** Tool-result blocks -> the sidecar's ``output`` list (text kept, other blocks as markers). */
export function resultToOutput(content) {
  return content.map((part) =>
    part && part.type === "text" ? { type: "text", text: String(part.text ?? "") } : { type: "openclaw_opaque" },
  );
}

/** The sidecar's ``output`` list back onto the original tool-result blocks. */
export function resultFromOutput(content, output) {
  if (!Array.isArray(output) || output.length !== content.length) return content;
  return content.map((part, i) => {
    const back = output[i];
    if (part && part.type === "text" && back && back.type === "text" && typeof back.text === "string") {
      return back.text === part.text ? part : { ...part, text: back.text };
    }
    return part;
  });
}

/** A rough token estimate (4 characters a token) for the host's compaction threshold. */
export function estimateTokens(messages) {
  let chars = 0;
  for (const msg of messages) chars += JSON.stringify(msg ?? null).length;
  return Math.ceil(chars / 4);
}
