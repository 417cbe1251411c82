"""The transcript index the SessionStart hook keeps for report/replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightmem_plugin.hosts.shared import transcripts


def test_record_and_find(tmp_path: Path, isolated_home: Path) -> None:
    t = tmp_path / "a.jsonl"
    t.write_text("{}\n")
    assert transcripts.record("s1", "claude-code", str(t)) is True
    assert transcripts.record("s1", "claude-code", str(t)) is False  # unchanged: nothing written
    assert transcripts.transcript_for("s1") == t
    assert transcripts.transcript_for("nope") is None
    assert (transcripts.index_path().stat().st_mode & 0o777) == 0o600


def test_a_vanished_transcript_is_not_returned(tmp_path: Path) -> None:
    transcripts.record("gone", "codex", str(tmp_path / "missing.jsonl"))
    assert transcripts.transcript_for("gone") is None


def test_the_index_keeps_the_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transcripts, "MAX_ENTRIES", 3)
    for i in range(5):
        transcripts.record(f"s{i}", "codex", f"/t/{i}.jsonl")
    transcripts.record("s2", "codex", "/t/2b.jsonl")  # re-recorded: becomes the newest
    assert list(transcripts.load()) == ["s3", "s4", "s2"]


def test_an_unreadable_index_is_empty(isolated_home: Path) -> None:
    transcripts.index_path().write_text("not json")
    assert transcripts.load() == {}
    transcripts.index_path().write_text('{"s": "not an object", "t": {"path": "/x"}}')
    assert transcripts.load() == {"t": {"host": "", "path": "/x"}}
