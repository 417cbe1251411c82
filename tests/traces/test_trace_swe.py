"""The swe reader on a real (small) session and on broken documents."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from lightmem_plugin.errors import TraceError
from lightmem_plugin.measure.traces import load_trace

DATA = Path(__file__).resolve().parents[1] / "data"
SESSION = DATA / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz"


def raw() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(SESSION.read_bytes()))
    return doc


def test_real_session_calls_and_usage() -> None:
    doc = raw()
    trace = load_trace(SESSION)
    assert (trace.id, trace.provider, trace.kind) == (doc["id"], "deepseek", "swe")
    assert trace.model == "deepseek/deepseek-reasoner"
    assert trace.meta == {"exit_status": "InternalServerError"}
    assert len(trace.calls) == len(doc["calls"]) == 16
    for call, rec in zip(trace.calls, doc["calls"], strict=True):
        assert len(call.prompt) == rec["message_index"]
        assert call.output == doc["messages"][rec["message_index"]]
        assert call.output["role"] == "assistant"
        assert (call.prompt_tokens, call.cached_tokens) == (rec["prompt_tokens"], rec["cached_tokens"])
        assert call.completion_tokens == rec["completion_tokens"]
        assert call.cache_read_input_tokens is None


def test_prompts_share_message_objects() -> None:
    trace = load_trace(SESSION)
    first, second = trace.calls[0], trace.calls[1]
    assert all(a is b for a, b in zip(first.prompt, second.prompt, strict=False))
    assert second.prompt[len(first.prompt)] is first.output


def test_session_without_calls() -> None:
    trace = load_trace(DATA / "deepseek_reasoner_dev__pvlib__pvlib-python-1854.json.gz")
    assert trace.calls == []
    assert trace.id == "deepseek_reasoner_dev__pvlib__pvlib-python-1854"


def write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "session.json"
    path.write_text(json.dumps(doc))
    return path


GOOD_MESSAGES = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": "a"},
]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"messages": {}, "calls": []}, "'messages' is dict, expected a list"),
        ({"messages": GOOD_MESSAGES, "calls": {}}, "'calls' is dict, expected a list"),
        ({"messages": [{"role": "robot"}], "calls": []}, "messages\\[0\\] has role 'robot'"),
        (
            {
                "messages": GOOD_MESSAGES,
                "calls": [{"message_index": 1, "prompt_tokens": 1, "cached_tokens": 0}],
            },
            "message_index 1 does not name an assistant message",
        ),
        (
            {
                "messages": GOOD_MESSAGES,
                "calls": [{"message_index": 9, "prompt_tokens": 1, "cached_tokens": 0}],
            },
            "message_index 9 does not name an assistant message",
        ),
        (
            {
                "messages": GOOD_MESSAGES,
                "calls": [{"message_index": 2, "prompt_tokens": -1, "cached_tokens": 0}],
            },
            "calls\\[0\\].prompt_tokens is -1, expected a non-negative integer",
        ),
        (
            {"messages": GOOD_MESSAGES, "calls": [{"message_index": 2, "prompt_tokens": 5}]},
            "calls\\[0\\].cached_tokens is None",
        ),
        ({"messages": GOOD_MESSAGES, "calls": ["x"]}, "calls\\[0\\] is str, expected an object"),
    ],
)
def test_bad_documents(tmp_path: Path, doc: object, message: str) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(TraceError, match=message) as info:
        load_trace(path)
    assert str(path) in str(info.value)


def test_minimal_document(tmp_path: Path) -> None:
    doc = {"messages": GOOD_MESSAGES, "calls": [{"message_index": 2, "prompt_tokens": 9, "cached_tokens": 0}]}
    trace = load_trace(write(tmp_path, doc))
    assert (trace.id, trace.source, trace.provider, trace.model) == ("session", "swe", "deepseek", None)
    assert trace.calls[0].prompt == GOOD_MESSAGES[:2]
    assert trace.calls[0].completion_tokens is None
