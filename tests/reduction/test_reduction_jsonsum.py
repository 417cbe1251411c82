from __future__ import annotations

import json
import re

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.config import ReductionConfig
from lightmem_plugin.measure.fidelity import changed_lines
from lightmem_plugin.reduction.base import PassContext, stub_keys
from lightmem_plugin.reduction.jsonsum import ITEMS, line_places, parse, score_lines
from lightmem_plugin.reduction.reduce import reduce_text

API_REPLY = json.dumps(
    {
        "total_count": 212,
        "incomplete_results": False,
        "items": [
            {
                "id": 1000 + i,
                "name": f"repo-{i}",
                "full_name": f"octo/repo-{i}",
                "owner": {"login": "octo", "id": 583231, "type": "User"},
                "description": "A repository used to test the search API " * 3,
                "topics": ["api", "search", "test"],
                "stargazers_count": 10 * i,
            }
            for i in range(60)
        ],
    },
    indent=2,
)
MARK_RE = re.compile(r'^\[lightmem2: (?:lines (\d+):(\d+) elided|.*lines="(\d+):(\d+)".*)\]$')


def _ctx(store: dict[str, bytes], mode: str = "normal", **table: object) -> PassContext:
    def put(data: bytes) -> str:
        key = str(xxhash.xxh3_128_hexdigest(data))
        store[key] = data
        return key

    cfg = ReductionConfig()
    return PassContext(cfg.table(mode).model_copy(update={"passes": ["json"], **table}), cfg, put)  # type: ignore[arg-type]


def test_an_api_reply_keeps_its_keys_and_first_items_verbatim() -> None:
    store: dict[str, bytes] = {}
    out = reduce_text(API_REPLY, _ctx(store))
    assert out != API_REPLY and len(out) < len(API_REPLY) // 4
    shown = out.splitlines()
    original = API_REPLY.splitlines()
    # every line outside our markers is a line of the original, in order
    assert changed_lines(API_REPLY, out) == []
    assert '  "total_count": 212,' in shown and '  "incomplete_results": false,' in shown
    assert '      "full_name": "octo/repo-0",' in shown
    assert not any("repo-59" in x for x in shown)
    assert shown[-1] == "}"  # the document still closes
    # the markers name exactly the lines they stand for
    rebuilt: list[str] = []
    for line in shown:
        m = MARK_RE.match(line)
        if m:  # an in-place marker, or the one stub of a single elided region
            first, last = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            rebuilt.extend(original[int(first) - 1 : int(last)])
        elif not line.startswith("[lightmem2"):
            rebuilt.append(line)
    assert rebuilt == original
    key = stub_keys(out)[0]
    assert store[key].decode() == API_REPLY


def test_no_line_is_made_up() -> None:
    """The summary this pass printed before re-serialised records on one line and ended each cut
    array with a string that read as one of its elements: ``"…(57 more items, 60 in all)"``."""
    out = reduce_text(API_REPLY, _ctx({}))
    assert "more items" not in out and "…" not in out
    assert all(x in API_REPLY.splitlines() for x in out.splitlines() if not x.startswith("[lightmem2"))


def test_places_count_brackets_and_commas_outside_strings_only() -> None:
    lines = ["[", '  {"a": "x, [y]"},', '  {"a": "z"},', '  {"a": "w"}', "]"]
    assert line_places(lines) == [(0, 0), (1, 0), (1, 1), (1, 2), (0, 0)]
    scores = score_lines(lines)
    assert scores[1] > 1 and scores[2] > 1 and scores[3] == 1  # the third item is past ITEMS
    assert ITEMS == 2


def test_a_minified_document_is_left_to_head_and_tail() -> None:
    text = json.dumps(json.loads(API_REPLY))
    assert reduce_text(text, _ctx({})) == text  # the json pass alone: nothing it can choose


REPLY = json.dumps({**json.loads(API_REPLY), "items": json.loads(API_REPLY)["items"][:20]}, indent=2)
"""20 records (~10k chars): two of them stay under hardCapChars, whose cut would apply anyway."""
BROKEN = {
    "a NaN": REPLY.replace('"total_count": 212', '"total_count": NaN'),
    "text after it": REPLY + "\ntrailing words\n",
    "two documents": REPLY + "\n" + REPLY,
    "cut short": REPLY.rsplit("\n", 3)[0],
    "text before it": "Error: {not json}\n" + REPLY,
}


def test_the_fixture_is_reduced_when_it_is_valid() -> None:
    assert reduce_text(REPLY, _ctx({})) != REPLY  # so the cases below reach the pass
    assert all(len(t) < _ctx({}).reduction.hardCapChars for t in BROKEN.values())


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_document_that_is_not_one_valid_json_value_is_left_alone(name: str) -> None:
    text = BROKEN[name]
    assert parse(text) is None
    assert reduce_text(text, _ctx({})) == text


def test_parse_rejects_constants_but_reads_plain_json() -> None:
    assert parse("[1, 2]") == [1, 2]
    assert parse("[NaN]") is None
    assert parse("[" * 100_000 + "]" * 100_000) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=8) | st.dictionaries(st.text(max_size=8), children, max_size=8)
    ),
    max_leaves=80,
)


@settings(max_examples=80, deadline=None)
@given(json_values, st.integers(min_value=200, max_value=3000))
def test_every_shown_line_is_original_and_every_elided_one_recoverable(value: object, cap: int) -> None:
    text = json.dumps(value, indent=1, ensure_ascii=False)
    store: dict[str, bytes] = {}
    out = reduce_text(text, _ctx(store, triggerChars=100, capChars=cap))
    assert out == reduce_text(text, _ctx({}, triggerChars=100, capChars=cap))
    if out == text:
        return
    assert changed_lines(text, out) == []
    assert store[stub_keys(out)[0]].decode("utf-8", "surrogatepass") == text
