"""Test runs of other runners: each failure's block stays whole, the passing noise goes.

The outputs are built as jest, vitest, go test and cargo test print them (the dev traces hold pytest,
unittest and ExUnit runs, tested in test_reduction_kinds)."""

from __future__ import annotations

import json

import pytest

from lightmem_plugin.config import ReductionConfig
from lightmem_plugin.reduction.base import STUB_RE, PassContext
from lightmem_plugin.reduction.kinds import ToolCall, classify
from lightmem_plugin.reduction.reduce import reduce_text
from lightmem_plugin.reduction.testrun import failure_lines

PASSING = "".join(f"    \u2713 renders row {i} (3 ms)\n" for i in range(150))
CASES = range(1, 5)  # four failures: together longer than any mode's head and tail


def _jest_failure(n: int) -> str:
    return (
        f"  \u25cf sum \u203a adds {n} + 2\n\n"
        "    expect(received).toBe(expected) // Object.is equality\n\n"
        f"    Expected: {n + 2}\n    Received: {n + 3}\n\n"
        f"      {n + 2} | test('adds {n} + 2', () => {{\n"
        f"    > {n + 3} |   expect(sum({n}, 2)).toBe({n + 2});\n"
        "        |                     ^\n\n"
        f"      at Object.toBe (src/sum.test.js:{n + 3}:21)\n\n"
    )


JEST = (  # jest prints each file's failures under it: the failing file first, then the others
    " FAIL  src/sum.test.js\n  sum\n"
    + "".join(f"    \u2715 adds {n} + 2 (4 ms)\n" for n in CASES)
    + "\n"
    + "".join(_jest_failure(n) for n in CASES)
    + " PASS  src/rows.test.js\n  rows\n"
    + PASSING
    + "\nTest Suites: 1 failed, 1 passed, 2 total\nTests:       4 failed, 150 passed, 154 total\n"
    "Time:        1.2 s\n"
)
JEST_BLOCK = [f"    Received: {n + 3}" for n in CASES] + [
    f"    > {n + 3} |   expect(sum({n}, 2)).toBe({n + 2});" for n in CASES
]

VITEST = (  # vitest lists every file, then one section of all failures
    " \u2713 test/rows.test.ts (150 tests) 40ms\n"
    + PASSING
    + " \u276f test/sum.test.ts (4 tests | 4 failed) 9ms\n\n"
    + "\u23af\u23af\u23af\u23af\u23af\u23af\u23af Failed Tests 4 \u23af\u23af\u23af\u23af\u23af\u23af\u23af\n\n"
    + "".join(
        f" FAIL  test/sum.test.ts > sum > adds {n} + 2\n"
        f"AssertionError: expected {n + 3} to be {n + 2} // Object.is equality\n\n"
        f"- Expected\n+ Received\n\n- {n + 2}\n+ {n + 3}\n\n"
        f" \u276f test/sum.test.ts:{n + 3}:21\n      {n + 2}| test('adds {n} + 2', () => {{\n"
        f"      {n + 3}|   expect(sum({n}, 2)).toBe({n + 2})\n       |                     ^\n\n"
        f"\u23af\u23af\u23af\u23af[{n}/4]\u23af\n\n"
        for n in CASES
    )
    + " Test Files  1 failed | 1 passed (2)\n      Tests  4 failed | 150 passed (154)\n"
)
VITEST_BLOCK = [f"+ {n + 3}" for n in CASES] + [
    f"      {n + 3}|   expect(sum({n}, 2)).toBe({n + 2})" for n in CASES
]

GO = (  # the failing test runs in the middle
    "".join(f"=== RUN   TestRow{i}\n--- PASS: TestRow{i} (0.00s)\n" for i in range(60))
    + "".join(
        f"=== RUN   TestParse{n}\n--- FAIL: TestParse{n} (0.00s)\n"
        f'    parse_test.go:{10 * n}: Parse("{n}+2") = {n + 3}, want {n + 2}\n'
        f"        input was read as tokens [{n} + 2 +] from the lexer state dump above\n"
        for n in CASES
    )
    + "".join(f"=== RUN   TestRow{i}\n--- PASS: TestRow{i} (0.00s)\n" for i in range(60, 120))
    + "FAIL\nFAIL\tgithub.com/acme/calc\t0.012s\n"
)
GO_BLOCK = [f"        input was read as tokens [{n} + 2 +] from the lexer state dump above" for n in CASES]

CARGO = (
    "running 124 tests\n"
    + "".join(f"test rows::row_{i} ... ok\n" for i in range(120))
    + "".join(f"test calc::it_adds_{n} ... FAILED\n" for n in CASES)
    + "\nfailures:\n\n"
    + "".join(
        f"---- calc::it_adds_{n} stdout ----\nthread 'calc::it_adds_{n}' panicked at src/calc.rs:{30 + n}:9:\n"
        f"assertion `left == right` failed\n  left: {n + 3}\n right: {n + 2}\n"
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n"
        for n in CASES
    )
    + "\nfailures:\n"
    + "".join(f"    calc::it_adds_{n}\n" for n in CASES)
    + "\ntest result: FAILED. 120 passed; 4 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s\n"
)
CARGO_BLOCK = [f"  left: {n + 3}" for n in CASES] + [f"    calc::it_adds_{n}" for n in CASES]


def _ctx(mode: str, command: str) -> PassContext:
    cfg = ReductionConfig()
    call = ToolCall("bash", json.dumps({"command": command}))
    return PassContext(cfg.table(mode), cfg, lambda b: "f" * 32, call)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("command", "text", "block", "summary"),
    [
        ("npx jest", JEST, JEST_BLOCK, "Tests:       4 failed, 150 passed, 154 total"),
        ("npx vitest run", VITEST, VITEST_BLOCK, "      Tests  4 failed | 150 passed (154)"),
        ("go test ./...", GO, GO_BLOCK, "FAIL\tgithub.com/acme/calc\t0.012s"),
        (
            "cargo test",
            CARGO,
            CARGO_BLOCK,
            "test result: FAILED. 120 passed; 4 failed; 0 ignored; "
            "0 measured; 0 filtered out; finished in 0.01s",
        ),
    ],
)
@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_a_failures_block_and_the_summary_stay_and_passing_lines_go(
    mode: str, command: str, text: str, block: list[str], summary: str
) -> None:
    ctx = _ctx(mode, command)
    assert classify(text, ctx.call) == "test_run"
    out = reduce_text(text, ctx)
    assert STUB_RE.search(out) and len(out) < len(text) / 2, out
    shown = out.split("\n")
    for line in [*block, summary]:
        assert line in shown, (line, out)


def test_a_passing_runs_lines_are_no_failure_block() -> None:
    lines = (JEST.split(" FAIL  ")[0] + GO.split("=== RUN   TestParse")[0]).split("\n")
    assert failure_lines(lines) == set()
