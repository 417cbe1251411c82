from __future__ import annotations

from pathlib import Path

import pytest

from lightmem_plugin.reduction import logsum
from lightmem_plugin.reduction.truncate import select_by_score
from lightmem_plugin.reduction.work import Mark, Work, with_protected

DATA = Path(__file__).resolve().parent.parent / "data" / "reduction"


def _lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def _kept(name: str, budget: int) -> list[str]:
    lines = _lines(name)
    scores = logsum.score_lines(lines, 600, 400)
    keep = select_by_score([len(x) for x in lines], scores, budget, 32, ends_first=True)
    return [line for line, k in zip(lines, keep, strict=True) if k]


@pytest.mark.parametrize("name", ["pytest_failure.txt", "build_log.txt", "traceback.txt"])
def test_logs_are_recognised(name: str) -> None:
    assert logsum.is_log(_lines(name))


@pytest.mark.parametrize(
    "text",
    [
        "class Schema:\n    def load(self, data):\n        try:\n            return self._do_load(data)\n"
        "        except KeyError as err:\n            raise ValidationError(str(err)) from err\n" * 20,
        "\n".join(f"./src/pkg/module_{i}.py:{i * 3}:    if value is None:" for i in range(50)),
        "total 48\ndrwxr-xr-x 2 root root 4096 Jan  1 00:00 .\n"
        + "-rw-r--r-- 1 root root 120 Jan  1 00:00 f.py\n" * 40,
        "",
    ],
    ids=["code-view", "grep-hits", "ls", "empty"],
)
def test_non_logs_are_not_treated_as_logs(text: str) -> None:
    assert not logsum.is_log(text.splitlines())


@pytest.mark.parametrize(
    ("name", "budget", "must_keep"),
    [
        (
            "pytest_failure.txt",
            1200,
            [
                "=================== 1 failed, 47 passed, 1 warning in 0.84s ====================",
                "FAILED tests/test_fields.py::TestDateTime::test_rfc822_format - AssertionError: assert "
                "'2013-11-10T01:23:45' == 'Sun, 10 Nov 2013 01:23:45 -0000'",
                "E       AssertionError: assert '2013-11-10T01:23:45' == 'Sun, 10 Nov 2013 01:23:45 -0000'",
                "tests/test_fields.py::TestDateTime::test_rfc822_format FAILED                [ 85%]",
                "_____________________ TestDateTime.test_rfc822_format ______________________",
            ],
        ),
        (
            "build_log.txt",
            1200,
            [
                "src/module_42.c:131:5: error: implicit declaration of function 'write_all' "
                "[-Werror=implicit-function-declaration]",
                "make: *** [Makefile:24: build/obj/module_42.o] Error 1",
                "src/module_17.c:88:12: warning: unused variable 'len' [-Wunused-variable]",
                "make: Target 'all' not remade because of errors.",
            ],
        ),
        (
            "traceback.txt",
            900,
            [
                "TypeError: 'NoneType' object is not subscriptable",
                '  File "/testbed/src/marshmallow/schema.py", line 322, in _invoke_field_validators',
                "    value = item[field_obj.attribute or field_name]",
                "Traceback (most recent call last):",
            ],
        ),
    ],
)
def test_the_lines_an_agent_quotes_survive(name: str, budget: int, must_keep: list[str]) -> None:
    kept = _kept(name, budget)
    for line in must_keep:
        assert line in kept
    assert sum(len(x) + 1 for x in kept) < sum(len(x) + 1 for x in _lines(name))


def test_runs_of_passed_lines_keep_only_their_ends() -> None:
    lines = _lines("pytest_failure.txt")
    kept = _kept("pytest_failure.txt", 1200)
    passed = [x for x in lines if x.endswith("%]") and "PASSED" in x]
    assert len([x for x in kept if x in passed]) <= 6


def test_repeated_errors_rank_only_their_last_occurrence() -> None:
    lines = ["start", "ValueError: bad", "noise", "ValueError: bad", "end"]
    scores = logsum.score_lines(lines, 0, 0)
    assert scores[3] == logsum.S_ERROR
    assert scores[1] < logsum.S_ERROR


def test_library_frames_rank_below_own_frames() -> None:
    lines = _lines("traceback.txt")
    scores = logsum.score_lines(lines, 0, 0)
    own = lines.index('  File "/testbed/src/marshmallow/schema.py", line 100, in validate')
    lib = next(i for i, x in enumerate(lines) if "site-packages" in x)
    assert scores[own] > scores[lib]


def test_scores_are_deterministic_and_one_per_line() -> None:
    lines = _lines("build_log.txt")
    a = logsum.score_lines(lines, 600, 400)
    assert a == logsum.score_lines(lines, 600, 400)
    assert len(a) == len(lines)


def test_very_long_lines_are_scanned_cheaply() -> None:
    lines = ["x" * 1_000_000 + " ERROR", "Traceback (most recent call last):", "ValueError: boom"] * 3
    scores = logsum.score_lines(lines, 100, 100)
    assert len(scores) == len(lines)


def test_a_short_line_between_kept_tracebacks_is_shown_not_marked() -> None:
    """A marker costs more tokens than a short line it stands for (13 against 10 for the line
    below): between two tracebacks the log pass kept, such a line stays in view."""
    frames = "".join(
        f'  File "/repo/pkg/mod_{k}.py", line {10 + k}, in f{k}\n    call_{k}()\n' for k in range(6)
    )
    case = (
        "Stderr: Traceback (most recent call last):\n"
        + frames
        + "ModuleNotFoundError: No module named 'pytz'\n"
    )
    noise = "".join(f"progress {k}: copying template files into the project tree\n" for k in range(40))
    lines = (
        noise
        + case
        + "Stderr: retrying with the fallback loader\n"
        + case.replace("ModuleNotFoundError: No module named 'pytz'", "KeyError: 'x'")
        + noise
    ).split("\n")
    work = Work(lines, lines, list(range(len(lines))))
    between = lines.index("ModuleNotFoundError: No module named 'pytz'") + 1
    assert lines[between] == "Stderr: retrying with the fallback loader"
    assert between not in work.protected()  # only the new rule can show it
    assert len(lines[between]) > len(Mark(between, between).text())  # in chars, marking it would save
    pieces = with_protected(work, [False] * len(lines), "chars of log", True)
    shown = [p for p in pieces if isinstance(p, str)]
    assert lines[between] in shown and "KeyError: 'x'" in shown


def test_a_log_with_nothing_elided_has_no_log_stub() -> None:
    """Every line an error line or a cheap run between them: nothing is elided, so the output keeps
    no stub claiming head and tail were cut (sqlfluff's ``[Y/n] Traceback ...`` log, swe traces)."""
    lines = [
        "==== fixing violations ====",
        "1 fixable linting violations found",
        "Are you sure you wish to attempt to fix these? [Y/n] Traceback (most recent call last):",
        *[f'  File "/opt/lib/click/core.py", line {k}, in invoke' for k in range(1400, 1420)],
        "OSError: [Errno 6] No such device or address: '/dev/tty'",
    ]
    work = Work(lines, lines, list(range(len(lines))))
    assert with_protected(work, [False] * len(lines), "chars of log", True) == lines
