"""An output a later output refers to stays in view while that reference does.

The dedup and repeat passes send a repeated output, or its repeated lines, as a reference to the
earlier output that showed them; paging that earlier output out leaves the model no copy at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eviction_helpers import Session as Host
from eviction_helpers import module

from lightmem_plugin.config import Config
from lightmem_plugin.eviction import choosing, references
from lightmem_plugin.pipeline import LightMem, Session
from lightmem_plugin.reduction.kinds import ToolCall
from lightmem_plugin.store.registry import Registry


def started(tmp_path: Path, remaining: int, modules: int) -> tuple[Session, Host]:
    """An aggressive session (host call ids) whose task has read ``modules`` modules it still needs;
    ``remaining``: the expected remaining calls of the cost rule."""
    cfg = Config.model_validate(
        {
            "mode": "aggressive",
            "eviction": {"expectedRemainingCalls": remaining, "keepRecentTurns": 2},
            "stabilizer": {"shortCallIds": False},
        }
    )
    s = LightMem(config=cfg, registry=Registry(tmp_path / "reg")).session("refs")
    host = Host("Make the parser accept empty input.")
    for k in range(modules):
        host.call(f"cat pkg/mod{k}.py", module(f"m{k}", 40))
        s.before_model_call(host.messages)
    return s, host


def reread(tmp_path: Path, second: str) -> tuple[list[list[str]], list[dict[str, object]], str]:
    """A parser read, then read again (``second``: its text the second time), then six more steps,
    with a rule eager to page out stale reads."""
    s, host = started(tmp_path, 500, 3)
    first = f"call_{host.call('cat pkg/parser.py', module('parse', 120))}"
    s.before_model_call(host.messages)
    host.call("cat pkg/parser.py", second)  # a re-read makes the first read stale
    out = s.before_model_call(host.messages)
    for k in range(6):
        host.call(f"echo step {k}", f"step {k}")
        out = s.before_model_call(host.messages)
    return [list(b.call_ids) for b in s.evictor.state.batches], out, first


@pytest.mark.parametrize(
    "second",
    [module("parse", 120), module("parse", 120) + "\ndef parse_empty(x):\n    return None"],
    ids=["identical", "one-function-more"],
)
def test_a_read_a_later_repeat_refers_to_stays_in_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    """The second read reaches the model as a reference to the first (whole, or its lines as repeat
    markers); paging the first out as stale left the model no copy of the file at all."""
    paged, out, first = reread(tmp_path / "on", second)
    assert not any(first in ids for ids in paged)
    sent = "\n".join(str(m.get("content")) for m in out)
    assert f"tool call {first}" in sent  # the second read stands on the first ...
    assert module("parse", 120) in sent  # ... which the model still reads, verbatim
    # control: without the check, the same session pages the first read out
    monkeypatch.setattr(choosing, "stood_on", lambda *args: set())
    paged, out, first = reread(tmp_path / "off", second)
    assert any(first in ids for ids in paged)
    assert module("parse", 120) not in "\n".join(str(m.get("content")) for m in out)


def after_page_out(tmp_path: Path, again: str) -> tuple[list[list[str]], str, str]:
    """A stale parser read paged out (as in test_eviction_break_cost), then ``again`` printed by a
    later call: what the model reads of that later output."""
    s, host = started(tmp_path, 20, 12)
    first = f"call_{host.call('cat pkg/parser.py', module('parse', 120))}"
    s.before_model_call(host.messages)
    host.call("cat > pkg/parser.py << 'EOF'\nimport re\nEOF")
    for k in range(7):
        s.before_model_call(host.messages)
        host.call(f"echo step {k}", f"step {k}")
    host.call("git checkout pkg/parser.py && cat pkg/parser.py", again)
    out = s.before_model_call(host.messages)
    return [list(b.call_ids) for b in s.evictor.state.batches], str(out[-1]["content"]), first


@pytest.mark.parametrize(
    "again",
    [module("parse", 120), module("parse", 60)],
    ids=["the-same-output", "its-first-half"],
)
def test_a_repeat_of_a_paged_out_output_is_shown_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, again: str
) -> None:
    """Once a batch archived the first read, a later repeat of it (or of its lines) must not be sent as
    a reference to it: the model could read neither."""
    paged, last, first = after_page_out(tmp_path / "on", again)
    assert [first] in paged  # the feature under test happened: the first read left the context
    assert again in last and f"tool call {first}" not in last
    # control: with the paged-out output still counted as shown, the repeat points at it
    monkeypatch.setattr(Session, "_paged_out", lambda self, call_id: False)
    paged, last, first = after_page_out(tmp_path / "off", again)
    assert [first] in paged
    assert f"tool call {first}" in last and again not in last


def unnamed_reread(tmp_path: Path) -> tuple[list[list[str]], str, str]:
    """As OpenClaw runs tools: each output is reduced as it arrives, inside the turn, before any request
    has shown how the host spells its call id, so a repeat names no call ("identical to an earlier tool
    output"). A parser read twice, then six more steps, with a rule eager to page out stale reads."""
    cfg = Config.model_validate(
        {"mode": "aggressive", "eviction": {"expectedRemainingCalls": 500, "keepRecentTurns": 2}}
    )
    lm = LightMem(config=cfg, registry=Registry(tmp_path / "reg"))
    s = lm.session("openclaw-like")
    s.respelled_ids = True
    host = Host("Make the parser accept empty input.")
    read = ToolCall("bash", json.dumps({"command": "cat pkg/parser.py"}))  # the middleware names the tool
    other = f"call_{host.call('cat pkg/lexer.py', module('lex', 120))}"  # shares only the frame's lines
    s.ingest_tool_result(
        other, host.messages[-1]["content"], ToolCall("bash", '{"command": "cat pkg/lexer.py"}')
    )
    host.call("cat > pkg/lexer.py << 'EOF'\nimport re\nEOF")  # rewritten: that read is stale
    first = f"call_{host.call('cat pkg/parser.py', module('parse', 120))}"
    s.ingest_tool_result(first, host.messages[-1]["content"], read)
    second = f"call_{host.call('cat pkg/parser.py', module('parse', 120))}"
    sent_second = s.ingest_tool_result(second, host.messages[-1]["content"], read)
    for k in range(8):
        out = s.before_model_call(host.messages)
        host.call(f"echo step {k}", f"step {k}")
    out = s.before_model_call(host.messages)
    assert "identical to an earlier tool output" in sent_second  # the feature under test: unnamed
    paged = [list(b.call_ids) for b in s.evictor.state.batches]
    assert any(other in ids for ids in paged)  # a stale read it does not stand on still leaves
    return paged, "\n".join(str(m["content"]) for m in out), first


def test_a_reference_that_names_no_call_holds_its_source_by_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paged, sent, first = unnamed_reread(tmp_path / "on")
    assert not any(first in ids for ids in paged)
    assert module("parse", 120) in sent
    # control: without reading unnamed references, the first read is paged out and no copy is left
    monkeypatch.setattr(references, "names_no_call", lambda text: False)
    paged, sent, first = unnamed_reread(tmp_path / "off")
    assert any(first in ids for ids in paged)
    assert module("parse", 120) not in sent


def switched(tmp_path: Path) -> tuple[list[list[str]], str, str]:
    """Task 1 read a parser; the user set a new goal and task 2 printed it again, all in normal mode,
    where a repeat may refer across tasks; then the session switched to aggressive mode, where a
    finished task leaves the context at the next batch."""
    lm = LightMem(
        config=Config.model_validate({"mode": "normal", "stabilizer": {"shortCallIds": False}}),
        registry=Registry(tmp_path / "reg"),
    )
    s = lm.session("switched")
    host = Host("Read the parser.")
    first = f"call_{host.call('cat pkg/parser.py', module('parse', 120))}"
    host.say("It defines parse_0 to parse_119.")
    host.say("Now make parse_3 accept empty input.", role="user")
    host.call("cat pkg/parser.py", module("parse", 120))  # sent as a reference to task 1's read
    s.before_model_call(host.messages)
    assert lm._fixed is not None
    lm._fixed.mode = "aggressive"
    for k in range(9):
        host.call(f"echo step {k}", f"step {k}")
        out = s.before_model_call(host.messages)
    return (
        [list(b.call_ids) for b in s.evictor.state.batches],
        "\n".join(str(m["content"]) for m in out),
        first,
    )


def test_a_finished_task_a_later_output_refers_into_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paged, sent, first = switched(tmp_path / "on")
    assert f"identical to the output of tool call {first}" in sent
    assert module("parse", 120) in sent and not any("task:1" in ids for ids in paged)
    # control: without the check, task 1 leaves at the first batch and its read with it
    monkeypatch.setattr(choosing, "referred_into", lambda *args: False)
    paged, sent, first = switched(tmp_path / "off")
    assert any("task:1" in ids for ids in paged)
    assert f"identical to the output of tool call {first}" in sent and module("parse", 120) not in sent
