"""A repeat marker names the tool call whose output shows its lines, as the model reads that call's id.

Before, every marker read "as shown in an earlier output" (700 of 700 in the last prompts of the swe
sessions, normal mode, ``benchmarks/frame_audit.py``): true, but the model had to search the whole
history for the lines. Each case below goes through a session, as a request does.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from chat_turns import bash_turn

from lightmem_plugin.config import Config
from lightmem_plugin.pipeline import LightMem
from lightmem_plugin.reduction.base import stub_keys
from lightmem_plugin.reduction.linedup import MARKER_RE
from lightmem_plugin.store.registry import Registry
from lightmem_plugin.store.session_state import StateStore

HOST_IDS = {"stabilizer": {"shortCallIds": False}}
VIEW = "".join(f"    {i:4}  def handler_{i}(request, response):  # a line of the module\n" for i in range(60))
OTHER = "".join(f"    {i:4}  def other_{i}(request):  # a line of another module\n" for i in range(60))


def _history(*turns: tuple[str, str, str]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"role": "user", "content": "fix the handlers"}]
    for turn in turns:
        out.extend(bash_turn(*turn))
    return out


def _marks(text: object) -> list[tuple[int, int, str | None]]:
    return [(int(a), int(b), c or None) for a, b, c in MARKER_RE.findall(str(text))]


def test_a_marker_names_the_call_that_showed_its_lines() -> None:
    session = LightMem(Config.model_validate(HOST_IDS)).session("s")
    fresh = "".join(f"new line {i} nobody has seen\n" for i in range(5))
    turns = [
        ("call_a", "cat -n app.py", VIEW),
        ("call_b", "cat -n app.py; echo more", VIEW[:-1] + "\n" + fresh),
    ]
    out = session.before_model_call(_history(*turns))
    assert out[2]["content"] == VIEW
    assert _marks(out[4]["content"]) == [(1, 60, "call_a")], out[4]["content"]


def test_a_run_of_lines_two_calls_showed_names_both_and_a_fourth_source_starts_a_new_marker() -> None:
    session = LightMem(Config.model_validate(HOST_IDS)).session("s")
    both = VIEW + OTHER
    out = session.before_model_call(
        _history(
            ("call_a", "cat -n app.py", VIEW),
            ("call_b", "cat -n lib.py", OTHER),
            ("call_c", "cat -n *.py", both),
        )
    )
    assert _marks(out[6]["content"]) == [(1, 120, "call_a, call_b")], out[6]["content"]
    keys = stub_keys(str(out[6]["content"]))
    assert keys and session.plugin.registry.recover(keys[0]) == both
    # four sources in one run: the marker names three, the fourth begins the next marker
    parts = [
        "".join(f"    part {k} line {i}: some code of the module here\n" for i in range(10)) for k in range(4)
    ]
    fresh = LightMem(Config.model_validate(HOST_IDS)).session("t")
    turns = [(f"call_{k}", f"cat part{k}.py", parts[k]) for k in range(4)]
    shown = fresh.before_model_call(_history(*turns, ("call_all", "cat part*.py", "".join(parts))))
    assert _marks(shown[10]["content"]) == [(1, 30, "call_0, call_1, call_2"), (31, 40, "call_3")], shown[10][
        "content"
    ]


def test_with_short_call_ids_the_marker_names_the_id_the_model_reads() -> None:
    session = LightMem(Config()).session("s")
    out = session.before_model_call(
        _history(
            ("call_00_LongHostIdNumberOne", "cat -n app.py", VIEW),
            ("call_00_LongHostIdNumberTwo", "cat app.py", VIEW + "x = 1\n"),
        )
    )
    short = out[1]["tool_calls"][0]["id"]  # type: ignore[index]
    assert short != "call_00_LongHostIdNumberOne" and out[2]["tool_call_id"] == short
    assert _marks(out[4]["content"]) == [(1, 60, short)], out[4]["content"]


def test_a_host_that_respells_ids_gets_a_marker_naming_no_call_until_a_request_spelled_it() -> None:
    """OpenClaw may respell ids after we see them: a hook-time marker names a call only as a request
    the model received spelled it (as repeat references do)."""
    session = LightMem(Config.model_validate(HOST_IDS)).session("s")
    session.respelled_ids = True
    session.ingest_tool_result("call_a", VIEW)
    unseen = session.ingest_tool_result("call_b", VIEW + "x = 1\n")
    assert _marks(unseen) == [(1, 60, None)], unseen
    session.before_model_call(_history(("call_a", "cat -n app.py", VIEW)))  # now a request spelled it
    named = session.ingest_tool_result("call_c", VIEW + "y = 2\n")
    assert _marks(named) == [(1, 60, "call_a")], named


def test_a_part_repeating_an_earlier_part_of_its_own_call_names_no_call() -> None:
    """Codex code mode: one call's output in parts ``call_1#1``, ``call_1#2``; a stub never names its
    own call."""
    session = LightMem(Config.model_validate(HOST_IDS)).session("s")
    session.ingest_tool_result("call_1#1", VIEW)
    out = session.ingest_tool_result("call_1#2", VIEW + "x = 1\n")
    assert _marks(out) == [(1, 60, None)], out


def test_sources_survive_a_restart_and_an_older_state_names_no_call(tmp_path: Path) -> None:
    cfg = Config.model_validate(HOST_IDS)

    def plugin() -> LightMem:
        return LightMem(cfg, registry=Registry(tmp_path / "reg"), states=StateStore(tmp_path / "s.sqlite3"))

    first = plugin().session("s")
    first.before_model_call(_history(("call_a", "cat -n app.py", VIEW)))
    history = _history(("call_a", "cat -n app.py", VIEW), ("call_b", "cat app.py", VIEW + "x = 1\n"))
    again = plugin().session("s").before_model_call(history)  # a new process: sources from the store
    assert _marks(again[4]["content"]) == [(1, 60, "call_a")]
    # lines remembered by a state saved before sources were kept (null) give the old, unnamed marker
    with sqlite3.connect(tmp_path / "s.sqlite3") as db:
        assert db.execute("UPDATE entries SET value = 'null' WHERE ns = 'lines'").rowcount >= 60
    older = plugin().session("s")
    out = older.before_model_call([*history, *bash_turn("call_c", "cat app.py", VIEW + "y = 2\n")])
    assert out[4]["content"] == again[4]["content"]  # what was decided stays as it was
    assert _marks(out[6]["content"]) == [(1, 60, None)], out[6]["content"]


def test_calls_named_reads_every_reference_form_the_passes_write() -> None:
    """What eviction reads to keep an output in view while a later one refers to it: each form the
    dedup and repeat passes write, with one, two and three calls named; an unnamed one names none."""
    from lightmem_plugin.reduction.dedup import calls_named, names_no_call, reference
    from lightmem_plugin.reduction.linedup import marker

    text = "\n".join(
        [
            "kept line",
            marker(1, 4, ["aa1"]),
            marker(5, 9, ["bb2", "cc3"]),
            marker(10, 12, ["dd4", "ee5", "aa1"]),
            marker(13, 14),  # "an earlier output"
        ]
    )
    assert calls_named(text) == {"aa1", "bb2", "cc3", "dd4", "ee5"}
    assert calls_named(reference("call_7", "k" * 12, 4700)) == {"call_7"}
    assert calls_named(reference("call_7", "k" * 12, 4700, shell=True)) == {"call_7"}
    assert calls_named(reference(None, "k" * 12, 4700)) == set()
    assert calls_named("a line that mentions tool call call_7 in prose") == set()
    # the forms that name no call, which eviction matches by content instead
    assert names_no_call(reference(None, "k" * 12, 4700)) and names_no_call(marker(13, 14))
    assert not names_no_call(reference("call_7", "k" * 12, 4700)) and not names_no_call(marker(1, 4, ["aa1"]))
