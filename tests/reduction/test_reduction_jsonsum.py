from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lightmem_plugin.reduction.jsonsum import parse, summarize

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


def test_api_reply_summary_keeps_shape_keys_counts_and_first_items() -> None:
    out = summarize(API_REPLY, 1200)
    assert out is not None and len(out) <= 1200
    assert out.splitlines()[0].startswith("JSON object with 3 keys")
    assert '"total_count": 212' in out
    assert '"incomplete_results": false' in out
    assert "60 in all" in out
    assert '"full_name": "octo/repo-0"' in out
    assert "repo-59" not in out


@pytest.mark.parametrize("budget", [300, 600, 1200, 5000])
def test_summary_fits_every_budget_or_gives_up(budget: int) -> None:
    out = summarize(API_REPLY, budget)
    assert out is None or len(out) <= budget


def test_more_budget_shows_more() -> None:
    small, large = summarize(API_REPLY, 500), summarize(API_REPLY, 3000)
    assert small is not None and large is not None
    assert len(small) < len(large)


def test_array_of_scalars() -> None:
    out = summarize(json.dumps(list(range(5000))), 400)
    assert out is not None
    assert out.splitlines()[0].startswith("JSON array of 5000 items")
    assert "[0, 1, 2" in out and "4997 more items" in out


@pytest.mark.parametrize(
    "text",
    [
        '{"a": NaN, "b": [1, 2, 3]}',
        '{"a": Infinity}',
        "{'single': 'quotes'}",
        '{"a": 1} trailing',
        '{"a": 1}\n{"b": 2}',
        "[1, 2, 3",
        "42",
        '"just a string"',
        "",
        "Error: {not json}",
        "[" * 100_000 + "]" * 100_000,
        "{" + '"a": 1, ' * 3 + "}",
    ],
)
def test_invalid_or_non_container_json_is_left_alone(text: str) -> None:
    assert summarize(text, 1200) is None


def test_deeply_nested_valid_json_does_not_raise() -> None:
    text = "[" * 500 + "]" * 500
    out = summarize(text, 1200)
    assert out is None or len(out) <= 1200


def test_unicode_and_lone_surrogates_survive() -> None:
    text = json.dumps([{"name": "café ☕", "raw": "\ud800"}] * 50)
    out = summarize(text, 1200)
    assert out is not None and "café ☕" in out


def test_parse_rejects_constants_but_reads_plain_json() -> None:
    assert parse("[1, 2]") == [1, 2]
    assert parse("[NaN]") is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=8) | st.dictionaries(st.text(max_size=8), children, max_size=8)
    ),
    max_leaves=60,
)


@given(json_values, st.integers(min_value=200, max_value=3000))
def test_summary_is_deterministic_and_bounded(value: object, budget: int) -> None:
    text = json.dumps(value)
    out = summarize(text, budget)
    assert out == summarize(text, budget)
    assert out is None or len(out) <= budget
