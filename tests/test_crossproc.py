"""The cross-process determinism helper can see hash-order dependence (so the tests using it can fail)."""

from __future__ import annotations

from crossproc import SEEDS, outputs


def test_hash_order_dependence_is_visible_across_the_seeds() -> None:
    for items in (["Version", "Date"], ["2.0", "2024-05-01"], list("abcdefgh")):
        got = outputs(f"print(list(set({items!r})))")
        assert len(got) == len(SEEDS) and len(set(got)) > 1, items


def test_order_independent_output_is_equal() -> None:
    first, *rest = outputs("print(sorted({'Version', 'Date', 'a', 'b'}))")
    assert first == b"['Date', 'Version', 'a', 'b']\n" and all(r == first for r in rest)
