from __future__ import annotations

import gzip
import json
import re
import time
from pathlib import Path

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.config import ALL_PASSES, LOSSLESS_PASSES, ModeTable, PassName, ReductionConfig
from lightmem_plugin.reduction.base import STUB_PREFIX, STUB_RE, PassContext, stub_keys
from lightmem_plugin.reduction.error_lines import is_error_line
from lightmem_plugin.reduction.reduce import MIN_SAVING, reduce_text

DATA = Path(__file__).resolve().parent.parent / "data"
MARK_RE = re.compile(r"^\[lightmem2: lines (\d+):(\d+) elided\]$")


class FakeArchive:
    """Dict-backed archive keyed like the registry (xxh3-128 of the bytes)."""

    def __init__(self) -> None:
        self.store: dict[str, bytes] = {}
        self.calls = 0

    def __call__(self, data: bytes) -> str:
        self.calls += 1
        key: str = xxhash.xxh3_128_hexdigest(data)
        self.store[key] = data
        return key

    def recover(self, key: str, first: int, last: int) -> str:
        text = self.store[key].decode("utf-8", "surrogatepass")
        return "".join(text.splitlines(keepends=True)[first - 1 : last])


def _ctx(mode: str = "normal", archive: FakeArchive | None = None, **table: object) -> PassContext:
    cfg = ReductionConfig()
    base = cfg.table(mode)  # type: ignore[arg-type]
    return PassContext(base.model_copy(update=table), cfg, archive or FakeArchive())


def _read(name: str) -> str:
    return (DATA / "reduction" / name).read_text(encoding="utf-8")


CODE_VIEW = "".join(
    f"    def method_{i}(self, value: int) -> int:\n        return value * {i} + self.offset_{i}\n\n"
    for i in range(80)
)


def test_short_and_already_reduced_outputs_pass_through_without_archiving() -> None:
    archive = FakeArchive()
    ctx = _ctx(archive=archive)
    assert reduce_text("short output", ctx) == "short output"
    reduced = reduce_text(CODE_VIEW, ctx)
    calls = archive.calls
    assert reduce_text(reduced, ctx) == reduced
    assert archive.calls == calls


def test_code_view_keeps_head_and_tail_around_one_stub_naming_the_elided_lines() -> None:
    archive = FakeArchive()
    out = reduce_text(CODE_VIEW, _ctx(archive=archive))
    stubs = [line for line in out.splitlines() if line.startswith(STUB_PREFIX)]
    assert len(stubs) == 1
    m = re.search(r'lines="(\d+):(\d+)"', stubs[0])
    assert m is not None
    first, last = int(m.group(1)), int(m.group(2))
    head, _, tail = out.partition(stubs[0])
    key = stub_keys(out)[0]
    rebuilt = head + archive.recover(key, first, last) + tail[1:]
    assert rebuilt.rstrip("\n") == CODE_VIEW.rstrip("\n")
    assert len(head) <= 600 + 1 and len(tail) <= 400 + 1


FAILURE_ALLOWANCE = {"pytest_failure.txt": 700, "build_log.txt": 0, "traceback.txt": 0, "git_show.diff": 0}
"""Chars of a failure section beyond its error lines (the test's source lines), kept whole by design."""


@pytest.mark.parametrize(
    ("name", "mode", "must_keep"),
    [
        (
            "pytest_failure.txt",
            "normal",
            ["=== 1 failed, 47 passed, 1 warning in 0.84s ===", "FAILED tests/test_fields.py::"],
        ),
        ("build_log.txt", "aggressive", ["src/module_42.c:131:5: error: implicit declaration"]),
        ("traceback.txt", "aggressive", ["TypeError: 'NoneType' object is not subscriptable"]),
        (
            "git_show.diff",
            "normal",
            ["+    return os.path.normcase(os.path.realpath(path))", "commit 2ee20ccd"],
        ),
    ],
)
def test_realistic_outputs(name: str, mode: str, must_keep: list[str]) -> None:
    text = _read(name)
    archive = FakeArchive()
    # a diff up to fileViewChars stays whole (test_a_diff_the_agent_asked_for_stays_whole); below it, cut
    ctx = _ctx(mode, archive, fileViewChars=1200) if name.endswith(".diff") else _ctx(mode, archive)
    out = reduce_text(text, ctx)
    assert out != text and len(out) <= len(text) - MIN_SAVING
    # error lines (and, in a test run, the failures) are never cut, so only they may go over the cap
    kept_errors = [line for line in text.splitlines() if is_error_line(line)]
    assert all(line in out.splitlines() for line in kept_errors)
    assert (
        len(out) <= ctx.table.capChars + 250 + sum(len(x) + 1 for x in kept_errors) + FAILURE_ALLOWANCE[name]
    )
    for piece in must_keep:
        assert piece in out
    keys = stub_keys(out)
    assert keys and set(keys) == set(archive.store)
    assert archive.store[keys[0]].decode("utf-8", "surrogatepass") == text


def test_a_diff_the_agent_asked_for_stays_whole() -> None:
    """Cut to capChars, diffs lost 19% (normal) / 29% (aggressive) of their later-used lines on the
    dev traces, changed lines among them: up to fileViewChars a diff stays whole, as a file view."""
    text = _read("git_show.diff")
    assert len(text) > _ctx("aggressive").table.triggerChars
    for mode in ("normal", "aggressive"):
        assert reduce_text(text, _ctx(mode)) == text
    # one over the budget: every header and changed line stays, context goes first
    out = reduce_text(text, _ctx("aggressive", fileViewChars=len(text) - 400))
    assert out != text
    changed = [x for x in text.splitlines() if x.startswith(("+", "-", "@@", "diff --git"))]
    assert all(x in out.splitlines() for x in changed)


def test_a_diff_whose_head_a_pipe_cut_keeps_its_changes() -> None:
    """``git diff A..B -- f.py | tail -100`` starts inside a hunk, with no ---/+++ header: before, it
    was not read as a diff, and head + tail hid the changes the agent then used (astroid-1333)."""
    body = _read("git_show.diff").split("+++ b/src/pkg/modutils.py\n", 1)[1]
    text = "<returncode>0</returncode>\n<output>\n" + "\n".join(body.splitlines()[3:]) + "\n</output>\n"
    archive = FakeArchive()
    out = reduce_text(text, _ctx("normal", archive, triggerChars=300, capChars=300, fileViewChars=1100))
    assert out != text and stub_keys(out)
    changed = [x for x in body.splitlines()[3:] if x.startswith(("+", "-", "@@"))]
    assert changed and all(x in out.splitlines() for x in changed)


def test_log_markers_name_exactly_the_elided_lines() -> None:
    text = _read("pytest_failure.txt")
    archive = FakeArchive()
    out = reduce_text(text, _ctx(archive=archive, passes=["log"]))
    original = text.splitlines()
    shown: list[str] = []
    for line in out.splitlines():
        m = MARK_RE.match(line)
        if m:
            shown.extend(original[int(m.group(1)) - 1 : int(m.group(2))])
        elif not STUB_RE.search(line):
            shown.append(line)
    assert shown == original


def test_json_reply_keeps_its_first_records_verbatim() -> None:
    text = json.dumps(
        {"data": [{"id": i, "email": f"user{i}@example.com"} for i in range(300)], "page": 1}, indent=2
    )
    out = reduce_text(text, _ctx())
    assert '      "email": "user0@example.com"' in out.splitlines() and "user299" not in out
    assert '  "page": 1' in out.splitlines()
    assert len(STUB_RE.findall(out)) == 1
    assert len(out) <= _ctx().table.capChars + 250


def test_html_page_in_conservative_mode_is_slimmed_with_a_stub() -> None:
    page = (
        "<!DOCTYPE html><html><head><title>Docs</title><script>" + "var x = 1;" * 600 + "</script></head>"
        "<body><h1>Install</h1><p>Run <code>pip install widget</code>.</p></body></html>"
    )
    out = reduce_text(page, _ctx("conservative"))
    assert "# Install" in out and "pip install widget" in out and "var x" not in out
    assert STUB_RE.search(out)


@pytest.mark.parametrize(
    "text",
    [
        "Requirement already satisfied: wrapt<1.14,>=1.11 in /opt/venv/lib/python3.11/site-packages\n" * 60,
        "<class 'bytes'> is not <class 'str'>\n" * 150,
    ],
)
def test_angle_brackets_are_never_rewritten(text: str) -> None:
    out = reduce_text(text, _ctx("conservative"))
    assert out == text
    out = reduce_text(text, _ctx("normal"))
    body = [line for line in out.splitlines() if not line.startswith(STUB_PREFIX)]
    assert all(line in text.splitlines() for line in body)


def test_too_small_a_saving_returns_the_original() -> None:
    text = "x" * 70 + "\n"
    text = text * 17  # 1,207 chars: a head/tail cut (923 chars) plus a stub saves too little
    archive = FakeArchive()
    assert reduce_text(text, _ctx(archive=archive, triggerChars=1000, passes=["truncate"])) == text
    assert archive.calls == 0


def test_hard_cap_holds_in_every_mode() -> None:
    text = "".join(f"2024-05-01 12:00:{i % 60:02d} INFO worker {i} ok\n" for i in range(60_000))
    for mode in ("conservative", "normal", "aggressive"):
        out = reduce_text(text, _ctx(mode))
        assert len(out) <= ReductionConfig().hardCapChars
    cfg = ReductionConfig(hardCapChars=1000)
    ctx = PassContext(
        cfg.normal.model_copy(update={"capChars": 5000, "headChars": 3000, "tailChars": 2000}),
        cfg,
        FakeArchive(),
    )
    assert len(reduce_text(text, ctx)) <= 1000


@pytest.mark.parametrize(
    "text",
    [
        "x" * 10_000_000,
        "".join(f"line {i} of a long listing\n" for i in range(400_000)),
        "<!DOCTYPE html><html><body>" + "<div><p>cell</p></div>" * 400_000 + "</body></html>",
        "[" + ",".join(str(i) for i in range(2_000_000)) + "]",
    ],
    ids=["one-line", "many-lines", "html", "json"],
)
def test_huge_outputs_are_fast_and_bounded(text: str) -> None:
    start = time.perf_counter()
    out = reduce_text(text, _ctx())
    assert time.perf_counter() - start < 10
    assert len(out) <= 1200 + 250


@pytest.mark.parametrize(
    "text",
    [
        "ok \ud800 lone surrogate\n" * 300,
        "\udcff" * 5000,
        '{"claims": "to be JSON"' + " " * 5000,
        "<html><body><p>unclosed" + "<div>" * 3000,
        "\x1b[31m" * 2000 + "\r\n" * 500,
        "\x00\x01\x02 binary-ish \x7f\n" * 500,
    ],
)
def test_odd_inputs_never_raise_and_stay_recoverable(text: str) -> None:
    for mode in ("conservative", "normal", "aggressive"):
        archive = FakeArchive()
        out = reduce_text(text, _ctx(mode, archive))
        for key in stub_keys(out):
            assert archive.store[key].decode("utf-8", "surrogatepass") == text


# -- properties --------------------------------------------------------------------------------------

POOL = [
    "Traceback (most recent call last):",
    '  File "/testbed/src/pkg/core.py", line 42, in run',
    "    result = self.handler(request)",
    "ValueError: invalid literal for int() with base 10: 'abc'",
    "tests/test_core.py::test_run PASSED                                      [ 50%]",
    "=================== 1 failed, 12 passed in 0.42s ===================",
    "diff --git a/src/a.py b/src/a.py",
    "--- a/src/a.py",
    "+++ b/src/a.py",
    "@@ -1,4 +1,4 @@",
    "-    return 1",
    "+    return 2",
    "     context line",
    "def handler(self, request):",
    "    return self.process(request) <class 'bytes'>",
    "",
    "   ",
    "\x1b[32mINFO\x1b[0m worker started",
]
lines_st = st.lists(st.one_of(st.sampled_from(POOL), st.text(max_size=60)), min_size=1, max_size=120)
passes_st = st.sampled_from(
    [list(ALL_PASSES), list(LOSSLESS_PASSES), ["log", "diff", "truncate"], ["truncate"]]
)


def _small_ctx(passes: list[PassName], archive: FakeArchive) -> PassContext:
    table = ModeTable(triggerChars=300, capChars=250, headChars=120, tailChars=80, passes=passes)
    return PassContext(table, ReductionConfig(hardCapChars=1000), archive)


@settings(max_examples=150, deadline=None)
@given(lines_st, passes_st)
def test_deterministic_recoverable_idempotent_and_bounded(lines: list[str], passes: list[PassName]) -> None:
    text = "\n".join(lines)
    archive = FakeArchive()
    ctx = _small_ctx(passes, archive)
    out = reduce_text(text, ctx)
    assert out == reduce_text(text, _small_ctx(passes, FakeArchive()))
    assert reduce_text(out, ctx) == out
    assert len(out) <= 1000
    if out != text:
        assert len(out) <= len(text) - MIN_SAVING
        keys = stub_keys(out)
        assert len(set(keys)) == 1
        assert archive.store[keys[0]].decode("utf-8", "surrogatepass") == text
    else:
        assert archive.calls == 0


@settings(max_examples=150, deadline=None)
@given(lines_st)
def test_selection_passes_keep_only_verbatim_input_lines(lines: list[str]) -> None:
    text = "\n".join(lines)
    out = reduce_text(text, _small_ctx(["log", "diff", "truncate"], FakeArchive()))
    if out == text:
        return
    source = text.splitlines()
    for line in out.splitlines():
        if STUB_RE.search(line) or MARK_RE.match(line):
            continue
        assert line in source or any(line and (s.startswith(line) or s.endswith(line)) for s in source)


def test_real_trace_outputs() -> None:
    session = json.loads(
        gzip.decompress((DATA / "deepseek_reasoner_dev__pvlib__pvlib-python-1707.json.gz").read_bytes())
    )
    outputs = [m["content"] for m in session["messages"] if m["role"] == "tool"]
    reduced = 0
    for mode in ("conservative", "normal", "aggressive"):
        for text in outputs:
            archive = FakeArchive()
            ctx = _ctx(mode, archive)
            out = reduce_text(text, ctx)
            assert out == reduce_text(text, _ctx(mode))
            if out == text:
                continue
            reduced += 1
            assert len(out) <= ctx.table.capChars + 250
            assert archive.store[stub_keys(out)[0]].decode("utf-8", "surrogatepass") == text
    assert reduced >= 3


def test_a_shell_hint_stub_says_archived_not_elided() -> None:
    """Claude Code without our MCP server reads the shell form: "3,131 chars (head, tail and error lines
    shown) elided" sat above the lines it was shown. Both forms say what the archive holds."""
    from lightmem_plugin.reduction.base import stub

    whole = stub("0123456789ab", 3131, None, "chars (head, tail and error lines shown)", shell=True)
    assert whole == (
        "[lightmem2: 3,131 chars (head, tail and error lines shown) archived; run: lightmem2 recover 0123456789ab]"
    )
    assert "elided" not in stub("0123456789ab", 900, (4, 9), shell=True)
    assert stub_keys(whole) == ["0123456789ab"]


STUB_CHARS_RE = re.compile(
    r"\[lightmem2: ([\d,]+) .*?archived as (\w+); recover with lightmem2_recover\(key(?:, lines=\"(\d+):(\d+)\")?\)\]"
)
SPACED = "".join(f"line {i}: value = {i * 7}\n" + "\n" * 40 for i in range(40))
"""Short lines between runs of blank lines: only the whitespace pass changes it, and its stub covers
the whole output, last line included."""


@pytest.mark.parametrize("ending", ["", "\n", "\r\n"], ids=["no final newline", "newline", "crlf"])
@pytest.mark.parametrize("source", [CODE_VIEW, SPACED], ids=["head and tail", "tidied"])
def test_a_stubs_char_count_is_what_recover_returns(source: str, ending: str) -> None:
    """The count in a stub is the size of what ``recover`` gives back for it: one newline per line
    overcounted an output that ends without one, and undercounted ``\\r\\n`` lines."""
    text = source.rstrip("\n").replace("\n", "\r\n" if ending == "\r\n" else "\n") + ending
    archive = FakeArchive()
    out = reduce_text(text, _ctx(archive=archive))
    found = STUB_CHARS_RE.findall(out)
    assert found, out
    for chars, key, first, last in found:
        got = archive.recover(key, int(first), int(last)) if first else archive.store[key].decode()
        assert int(chars.replace(",", "")) == len(got)
    if source is SPACED:  # the stub reaches the last line, the one that may lack a newline
        assert [last for *_, last in found] == [str(len(text.splitlines()))]


def _verbose_run(n: int) -> str:
    results = "".join(
        f"tests/test_infer.py::InferenceTest::test_dict_case_{i:03d} PASSED\n" for i in range(n)
    )
    return (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.11.5, pytest-9.0.3, pluggy-1.6.0 -- /usr/bin/python\n"
        f"collecting ... collected {n + 1} items / 1200 deselected\n\n"
        + results
        + "tests/test_infer.py::InferenceTest::test_dict_starred FAILED\n\n"
        "=================================== FAILURES ===================================\n"
        "_________________________ InferenceTest.test_dict_starred _________________________\n"
        "E   AssertionError: assert 2 == 3\n"
        "tests/test_infer.py:88: AssertionError\n"
        f"=========================== 1 failed, {n} passed in 0.42s ===========================\n"
    )


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_a_short_list_of_test_results_stays_whole(mode: str) -> None:
    """The per-test lines of a verbose run are the list the agent picks its next test from: a short
    list stays whole (the swe agents ran `pytest -k dict` and then one test it named), a long one is
    cut like the rest of the passing output."""
    short = _verbose_run(40)
    out = reduce_text(short, _ctx(mode))
    assert len(short) > 2 * 1200  # over the cap: without the rule, head and tail would cut the list
    assert all(line in out.splitlines() for line in short.splitlines() if "::" in line)
    long = _verbose_run(200)
    out = reduce_text(long, _ctx(mode))
    names = [line for line in long.splitlines() if " PASSED" in line]
    shown = [line for line in names if line in out.splitlines()]
    assert 0 < len(shown) < len(names) / 4
    assert "E   AssertionError: assert 2 == 3" in out


def test_result_lines_of_pytest_and_unittest_verbose_runs() -> None:
    from lightmem_plugin.reduction.testrun import result_lines

    lines = [
        "test_add (test_math.TestMath.test_add) ... ok",
        "test_q (__main__.QTests.test_q) ... FAIL",
        "test_skip (m.T.test_skip) ... skipped 'no db'",
        "tests/a.py::test_x PASSED                                  [ 50%]",
        "tests/a.py::T::test_y[1-2] SKIPPED (needs net)",
        "    assert x == 1  # PASSED in code",
        "Ran 5 tests in 0.01s",
    ]
    assert result_lines(lines) == {0, 1, 2, 3, 4}
    assert result_lines(lines * 100) == set()  # too long a list: none is kept for being a result
