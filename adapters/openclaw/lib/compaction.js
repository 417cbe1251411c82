// When OpenClaw compacts: lightmem2's engine keeps delegating compaction to the runtime, and acts at
// its two edges (the Python side does the work: server/sidecar_compaction.py).
//
// Why delegate rather than own it: with `ownsCompaction: true` OpenClaw turns off its own
// auto-compaction and overflow precheck, and the engine's compact() must then free enough room on
// every overflow or the session stops. lightmem2's lossless compaction runs inside assemble (the
// sidecar pages old outputs out by the cost rule) but cannot yet promise a target size for every
// overflow the runtime recovers from; delegating keeps the runtime's guarantee. What the runtime's
// summary drops stays recoverable, and the summary carries lightmem2's note:
//
//   before  compact(): the history the engine last assembled for the session is archived (outputs
//           kept whole, the conversation as one document) and indexed for search
//   after   assemble(): the newest compaction summary in the history gets the note (the session
//           record and how to call lightmem2_search / lightmem2_recover) appended, the same bytes on
//           every turn (the sidecar keeps the note per summary), so the prefix stays cached
//
// The runtime's in-attempt auto-compaction does not call the engine's compact(); its summary still
// gets the note, from the record lightmem2 kept of the session so far.

const SEEN_LIMIT = 16;
export const NOTE_SEPARATOR = "\n\n";

/** The index of the newest compaction summary in `messages`, or -1. */
export function newestSummary(messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m && m.role === "compactionSummary" && typeof m.summary === "string") return i;
  }
  return -1;
}

/** `messages` with `note` after the summary of message `at` (a new list; the same list when no note). */
export function withNote(messages, at, note) {
  if (at < 0 || typeof note !== "string" || !note) return messages;
  const summary = messages[at].summary;
  if (summary.endsWith(NOTE_SEPARATOR + note)) return messages;
  const out = messages.slice();
  out[at] = { ...messages[at], summary: summary + NOTE_SEPARATOR + note };
  return out;
}

/** The chat-form history the engine last assembled, per session (bounded), for compact() to archive. */
export class Seen extends Map {
  set(key, value) {
    this.delete(key);
    if (this.size >= SEEN_LIMIT) this.delete(this.keys().next().value);
    return super.set(key, value);
  }
}

/**
 * Before the runtime compacts `sessionId`: archive what the engine last assembled. Resolves to the
 * conversation's archive key, or null (nothing seen, or the sidecar failed: compaction goes on).
 */
export async function archiveBefore(sidecar, sessionId, chat, logger) {
  if (!Array.isArray(chat) || !chat.length) return null;
  try {
    const answer = await sidecar.post("/sidecar/precompact", { sessionId, messages: chat });
    return typeof answer?.conversation === "string" ? answer.conversation : null;
  } catch (err) {
    logger?.debug?.(`lightmem2: history not archived before compaction: ${err.message}`);
    return null;
  }
}

/**
 * `messages` with lightmem2's note added to the newest compaction summary (asked of the sidecar once
 * per summary and process: `notes` memoises it); the messages as they were when there is none or the
 * sidecar fails.
 */
export async function noted(sidecar, sessionId, messages, notes, conversation, logger) {
  const at = newestSummary(messages);
  if (at < 0) return messages;
  const summary = messages[at].summary;
  const memo = `${sessionId}\u0000${summary}`;
  let note = notes.get(memo);
  if (note === undefined) {
    try {
      const body = { sessionId, summary };
      if (conversation) body.conversation = conversation;
      note = (await sidecar.post("/sidecar/compacted", body)).note;
    } catch (err) {
      logger?.debug?.(`lightmem2: compaction summary left as it was: ${err.message}`);
      return messages;
    }
    if (typeof note !== "string") return messages;
    notes.set(memo, note);
  }
  return withNote(messages, at, note);
}
