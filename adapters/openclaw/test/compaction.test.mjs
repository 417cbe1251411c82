// The compaction edges without OpenClaw: `node --test adapters/openclaw/test/`. The note goes after
// the newest summary once and in the same bytes every turn; every failure leaves OpenClaw's messages.

import assert from "node:assert/strict";
import { test } from "node:test";

import { NOTE_SEPARATOR, Seen, archiveBefore, newestSummary, noted, withNote } from "../lib/compaction.js";

const summary = (text, timestamp) => ({ role: "compactionSummary", summary: text, tokensBefore: 100, timestamp });
const messages = [
  summary("first compaction", 1),
  { role: "user", content: "go on", timestamp: 2 },
  summary("second compaction", 3),
  { role: "assistant", content: [{ type: "text", text: "ok" }], timestamp: 4 },
];
const NOTE = "[lightmem2: the host compacted ...]\n[lightmem2 session record]\nGoal: x";

/** A sidecar stand-in: answers each post with `answer(url, body)`, or throws it when it is an Error. */
function fakeSidecar(answer) {
  const posts = [];
  return {
    posts,
    async post(url, body) {
      posts.push({ url, body: structuredClone(body) });
      const out = answer(url, body);
      if (out instanceof Error) throw out;
      return out;
    },
  };
}

test("the note goes after the newest summary only, once, and the input list is not changed", () => {
  assert.equal(newestSummary(messages), 2);
  assert.equal(newestSummary([{ role: "user", content: "x" }]), -1);
  const before = structuredClone(messages);
  const out = withNote(messages, 2, NOTE);
  assert.deepEqual(messages, before);
  assert.equal(out[2].summary, "second compaction" + NOTE_SEPARATOR + NOTE);
  assert.deepEqual({ ...out[2], summary: "" }, { ...messages[2], summary: "" }); // every other field kept
  assert.equal(out[0], messages[0]);
  assert.equal(withNote(out, 2, NOTE), out); // already there: not added twice
  assert.equal(withNote(messages, 2, ""), messages);
  assert.equal(withNote(messages, -1, NOTE), messages);
});

test("each summary's note is asked once and added in the same bytes on every turn", async () => {
  const sidecar = fakeSidecar((url, body) => ({ note: `${NOTE} for ${body.summary}` }));
  const notes = new Map();
  const a = await noted(sidecar, "s1", messages, notes, "ab".repeat(16), null);
  const b = await noted(sidecar, "s1", messages, notes, null, null);
  assert.deepEqual(a, b);
  assert.equal(a[2].summary, `second compaction${NOTE_SEPARATOR}${NOTE} for second compaction`);
  assert.deepEqual(sidecar.posts, [
    { url: "/sidecar/compacted", body: { sessionId: "s1", summary: "second compaction", conversation: "ab".repeat(16) } },
  ]);
  const plain = [{ role: "user", content: "no compaction yet" }];
  assert.equal(await noted(sidecar, "s1", plain, notes, null, null), plain);
  assert.equal(sidecar.posts.length, 1); // no summary: no call
});

test("a sidecar that fails or answers without a note leaves the summary as OpenClaw wrote it", async () => {
  for (const answer of [new Error("down"), {}, { note: 7 }]) {
    const sidecar = fakeSidecar(() => answer);
    const notes = new Map();
    assert.equal(await noted(sidecar, "s", messages, notes, null, null), messages);
    assert.equal(notes.size, 0); // asked again next turn
  }
});

test("before a compaction the history last assembled is archived; nothing seen or a failure is no key", async () => {
  const chat = [{ role: "user", content: "read big.log" }, { role: "tool", tool_call_id: "c", content: "x" }];
  const sidecar = fakeSidecar(() => ({ archived: 1, conversation: "cd".repeat(16) }));
  assert.equal(await archiveBefore(sidecar, "s", chat, null), "cd".repeat(16));
  assert.deepEqual(sidecar.posts, [{ url: "/sidecar/precompact", body: { sessionId: "s", messages: chat } }]);
  assert.equal(await archiveBefore(sidecar, "s", undefined, null), null);
  assert.equal(await archiveBefore(sidecar, "s", [], null), null);
  assert.equal(sidecar.posts.length, 1);
  assert.equal(await archiveBefore(fakeSidecar(() => new Error("down")), "s", chat, null), null);
});

test("the history kept per session is bounded, newest kept", () => {
  const seen = new Seen();
  for (let i = 0; i < 40; i++) seen.set(`s${i}`, [i]);
  seen.set("s39", ["again"]);
  assert.equal(seen.size, 16);
  assert.ok(!seen.has("s0"));
  assert.deepEqual(seen.get("s39"), ["again"]);
});
