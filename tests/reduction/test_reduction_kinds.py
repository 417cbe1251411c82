"""Output kinds from the command and the content, and what each kind's pass keeps."""

from __future__ import annotations

import json
import re

import pytest

from lightmem_plugin.config import FILE_VIEW_CHARS, ReductionConfig
from lightmem_plugin.reduction import logsum
from lightmem_plugin.reduction.base import STUB_RE, PassContext
from lightmem_plugin.reduction.error_lines import is_error_line
from lightmem_plugin.reduction.kinds import ToolCall, classify, kind_of_command
from lightmem_plugin.reduction.reduce import reduce_text


def bash(command: str) -> ToolCall:
    return ToolCall("bash", json.dumps({"command": command}))


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("cd /testbed && cat -n src/a.py | sed -n '100,200p'", "file_view"),
        ("sed -n '1,80p' setup.cfg", "file_view"),
        ("cd /testbed && grep -rn 'def foo' src/ | head -40", "search"),
        ("cat -n src/a.py | grep -n foo", "search"),
        ("cd /testbed && python -m pytest tests/test_x.py -x 2>&1 | tail -50", "test_run"),
        ("python runtests.py auth_tests", "test_run"),
        ("pnpm test -- --run", "test_run"),
        ("./gradlew :app:test --info", "test_run"),
        ("cargo nextest run", "test_run"),
        ("bundle exec rake spec", "test_run"),
        ("pip install -e .", "build_log"),
        ("git diff", "diff"),
        ("ls -la src", "listing"),
        ("pwd && ls -la", "listing"),
        ("cd /testbed && git log --oneline d0775d5f..e36b4388 | head -30", "listing"),
        ('git log --all --grep="namespace" --oneline | head -20', "listing"),
        ("git show e36b4388 --stat", "listing"),
        ("git diff --name-only HEAD~3", "listing"),
        ("git log -p -3 src/a.py", "diff"),
        ("git show HEAD", "diff"),
        ("find . -name '*.py' | xargs wc -l", "listing"),
        # find piping into xargs grep, or running grep itself, prints search results
        ('find tests -name "*.py" -type f | xargs grep -n "RenameIndex" -B 5 -A 5', "search"),
        ("find . -name '*.py' | xargs -0 -n 1 grep -H bar", "search"),
        ('find tests -name "*.py" -exec grep -n "symmetrical=True" {} \\;', "search"),
        # a script the agent ran prints what it wrote the script to print
        ("python reproduce.py", "script"),
        ("cat > t.py << 'EOF'\nimport os\ngrep = 1\nEOF\npython t.py", "script"),
        ("cd /testbed && python3 -u scripts/check_fix.py 2>&1", "script"),
        ('python -c "import sys; print(sys.path)"', "script"),
        ("node probe.mjs", "script"),
        # a project's own commands, a module run, a shell script: content decides
        ("python setup.py build_ext -i", None),
        ("python manage.py migrate", None),
        ("python -m mypkg.cli --help", None),
        ("bash build.sh", None),
        ("sed -i 's/a/b/' f.py && cat f.py", "file_view"),
    ],
)
def test_kind_of_command(command: str, kind: str | None) -> None:
    assert kind_of_command(bash(command)) == kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Read", "file_view"),
        ("Grep", "search"),
        ("Glob", "listing"),
        ("WebSearch", "report"),
        ("WebFetch", "report"),
        ("TodoWrite", None),
    ],
)
def test_named_host_tools(name: str, kind: str | None) -> None:
    assert kind_of_command(ToolCall(name, json.dumps({"file_path": "/x"}))) == kind


TRACEBACK = (
    "starting\n"
    + "".join(f"step {i} ok with some padding text to make it long enough\n" for i in range(60))
    + "Traceback (most recent call last):\n"
    + "".join(f'  File "/repo/mod_{i}.py", line {10 + i}, in f{i}\n    call_{i}(x)\n' for i in range(12))
    + "AttributeError: 'NoneType' object has no attribute 'x'\n"
    + "".join(f"cleanup {i} done with some padding text to make it long enough\n" for i in range(40))
)


def test_content_decides_when_the_command_says_nothing() -> None:
    assert classify(TRACEBACK, bash("python -m app.job")) == "traceback"
    assert classify("a.py:1:import os\n" * 50, None) == "search"
    assert classify("nothing special\n" * 50, bash("python repro.py")) == "script"
    assert classify("nothing special\n" * 50, bash("./repro")) == "other"
    # a test command that printed no test output is not a test run
    assert classify("bash: pytest: command not found\n", bash("pytest")) == "other"
    # a test summary closing the output makes a test run without a test command: Claude Code's
    # TaskOutput, the result of a `mix test` it ran in the background, names no command
    compiled = "==> toml\nCompiling 10 files (.ex)\nGenerated toml app\n" * 40
    task = ToolCall("TaskOutput", json.dumps({"task_id": "b7636e2", "block": True}))
    assert classify(compiled + "\nFinished in 0.9 seconds\n15 tests, 0 failures\n", task) == "test_run"
    assert classify(compiled + "1 failure\n", task) == "other"
    # a summary up in the middle (a script that printed one, then more) says nothing
    assert classify("15 tests, 0 failures\n" + compiled, None) == "other"


def _ctx(mode: str, call: ToolCall | None) -> PassContext:
    cfg = ReductionConfig()
    return PassContext(cfg.table(mode), cfg, lambda b: "f" * 32, call)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_a_traceback_keeps_every_frame_and_the_exception(mode: str) -> None:
    out = reduce_text(TRACEBACK, _ctx(mode, bash("python -m app.job")))
    assert STUB_RE.search(out) and len(out) < len(TRACEBACK)
    for line in TRACEBACK.splitlines():
        if is_error_line(line) or line.startswith("    call_"):
            assert line in out.splitlines(), line


def test_head_tail_fallback_keeps_error_lines_in_the_middle() -> None:
    """The `other` kind: head and tail, but an exception in the middle is not cut (it was, before)."""
    text = "".join(f"line {i} of a long and plain program output\n" for i in range(200))
    text = text.replace("line 100 of a long", "ValueError: the real cause\nline 100 of a long")
    out = reduce_text(text, _ctx("normal", bash("./run.sh")))
    assert "ValueError: the real cause" in out.splitlines()
    assert re.search(r"\[lightmem2: lines \d+:\d+ elided\]", out)


@pytest.mark.parametrize(
    ("command", "failure"),
    [
        (
            "npm run build",
            "TypeError: Cannot read properties of undefined (reading 'map')\n"
            "    at renderList (/app/src/list.js:14:22)\n    at Object.<anonymous> (/app/src/index.js:3:1)\n"
            "    at Module._compile (node:internal/modules/cjs/loader:1256:14)\n",
        ),
        (
            "./bin/server --check",
            "panic: runtime error: index out of range [5] with length 3\n\ngoroutine 1 [running]:\n"
            "main.parse(...)\n\t/app/parse.go:41 +0x1d\nmain.main()\n\t/app/main.go:8 +0x25\n",
        ),
        (
            "./gradlew run",
            'Exception in thread "main" java.lang.IllegalStateException: closed\n'
            "\tat com.acme.Pool.take(Pool.java:88)\n\tat com.acme.App.main(App.java:12)\n"
            "Caused by: java.io.IOException: broken pipe\n",
        ),
    ],
)
def test_another_languages_failure_in_the_middle_stays(command: str, failure: str) -> None:
    """Head + tail keeps a Python traceback's frames from the middle; a Node, Go or Java one's too."""
    text = "".join(f"step {i}: prepared the next part of the build\n" for i in range(120))
    text += failure + "".join(f"step {i}: cleaned up after the build\n" for i in range(120))
    for mode in ("normal", "aggressive"):
        out = reduce_text(text, _ctx(mode, bash(command)))
        assert STUB_RE.search(out) and len(out) < len(text) / 2
        for line in failure.splitlines():
            if line.startswith(
                ("    at", "\tat", "\t/", "panic", "goroutine", "Exception", "Caused", "Type")
            ):
                assert line in out.splitlines(), (mode, line)


PYTEST = (
    "============================= test session starts ==============================\n"
    + "".join(
        f"tests/test_a.py::test_{i} PASSED                                  [ {i}%]\n" for i in range(80)
    )
    + "=================================== FAILURES ===================================\n"
    + "_________________________________ test_broken __________________________________\n\n"
    + "    def test_broken():\n>       assert f(1) == 2\nE       assert 3 == 2\n\ntests/test_a.py:12: AssertionError\n"
    + "=========================== short test summary info ============================\n"
    + "FAILED tests/test_a.py::test_broken - assert 3 == 2\n"
    + "========================= 1 failed, 80 passed in 0.42s =========================\n"
)


def test_a_test_run_keeps_the_failure_whole_and_drops_passing_lines() -> None:
    out = reduce_text(PYTEST, _ctx("aggressive", bash("python -m pytest tests")))
    for line in PYTEST.split("= FAILURES =")[1].splitlines()[1:]:
        assert line in out.splitlines(), line
    assert out.count(" PASSED ") < 20
    assert "1 failed, 80 passed in 0.42s" in out


SCRIPT_PRINTS = "".join(
    f"Test {i}: self-referential M2M with symmetrical={i % 2 == 0} and related_name\n"
    f"  -> created model_{i}, related_name='friends_{i}' accepted: {i % 3 != 0}\n"
    for i in range(1, 30)
)


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_a_scripts_prints_are_kept_whole(mode: str) -> None:
    """The agent wrote the script to print these lines: head + tail cut its ``Test N:`` results (the
    swe traces' most frequent later use out of view); a plain program's prints still are cut."""
    assert len(SCRIPT_PRINTS) > ReductionConfig().table(mode).triggerChars
    assert (
        reduce_text(SCRIPT_PRINTS, _ctx(mode, bash("cd /testbed && python test_m2m.py 2>&1")))
        == SCRIPT_PRINTS
    )
    cut = reduce_text(SCRIPT_PRINTS, _ctx(mode, bash("./gen_report")))
    assert STUB_RE.search(cut) and "Test 15: " not in cut


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_a_script_that_crashed_keeps_its_prints_with_the_traceback(mode: str) -> None:
    """The traceback pass kept the frames and cut what the script printed before it crashed, the
    lines the agent wrote it for."""
    assert classify(TRACEBACK, bash("cd /testbed && python repro.py 2>&1")) == "script"
    assert reduce_text(TRACEBACK, _ctx(mode, bash("cd /testbed && python repro.py 2>&1"))) == TRACEBACK
    assert "step 30 ok" not in reduce_text(TRACEBACK, _ctx(mode, bash("python -m app.job")))


CHECK_CASES = "".join(
    f"Test {i}: django-admin startapp with {'a trailing slash' if i % 2 else 'no slash'}...\n"
    + "".join(f"  step {k}: set up the temporary project directory for this case\n" for k in range(8))
    + "Exit code: 1\nStderr: Traceback (most recent call last):\n"
    + "".join(
        f'  File "/testbed/django/core/management/mod_{k}.py", line {10 + k}, in f{k}\n' for k in range(8)
    )
    + "ModuleNotFoundError: No module named 'pytz'\n\n"
    for i in range(1, 7)
)


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_a_scripts_prints_stay_whole_also_when_they_read_as_a_log(mode: str) -> None:
    """Before, a check script's cases went to the log pass, which kept the tracebacks and elided the
    ``Test 2:`` header and ``Exit code:`` lines between them (a swe session, django-14382)."""
    assert logsum.is_log(CHECK_CASES.splitlines())
    out = reduce_text(CHECK_CASES, _ctx(mode, bash("cd /testbed && python test_trailing_slash.py")))
    assert out == CHECK_CASES
    assert "chars of log (" in reduce_text(CHECK_CASES, _ctx(mode, bash("./run_checks")))


def test_a_long_scripts_prints_are_cut_under_their_own_label() -> None:
    prints = "".join(f"row {i}: value={i * 7} status=ok and some padding to fill\n" for i in range(900))
    assert len(prints) > ReductionConfig().table("normal").fileViewChars
    out = reduce_text(prints, _ctx("normal", bash("python dump_rows.py")))
    assert "chars of script output (head and tail shown)" in out
    assert "row 0: " in out and "row 899: " in out


LISTING = "total 176\n" + "".join(
    f"drwxrwxrwx   2 root root  4096 Oct 24  2024 {name}\n"
    for name in [f".dotfile_{i}" for i in range(15)]
    + ["django", "docs", "extras", "js_tests"]
    + [f"module_{i}" for i in range(25)]
)


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_a_listing_is_kept_whole(mode: str) -> None:
    """Head + tail hid the middle of ``ls -la``, where the package directory sits (``django``)."""
    assert len(LISTING) > ReductionConfig().table(mode).triggerChars
    assert reduce_text(LISTING, _ctx(mode, bash("ls -la /testbed/"))) == LISTING
    assert " django\n" not in reduce_text(LISTING, _ctx(mode, bash("./print_tree")))


def test_a_long_listing_keeps_head_and_tail_under_its_own_label() -> None:
    names = "".join(
        f"-rw-r--r-- 1 root root 120 Oct 24  2024 tests/case_{i:05}/test_it.py\n" for i in range(500)
    )
    assert len(names) > ReductionConfig().table("aggressive").fileViewChars
    out = reduce_text(names, _ctx("aggressive", bash("find tests -name '*.py' | xargs ls -la")))
    assert "chars of listing (head and tail shown)" in out
    assert "case_00000/" in out and "case_00499/" in out and "case_00250/" not in out


def test_a_requested_file_view_is_kept_whole() -> None:
    view = "".join(f"{i:6}\t    value_{i} = compute({i})  # a line of code\n" for i in range(1, 120))
    assert 2200 < len(view) < 8000
    assert reduce_text(view, _ctx("normal", bash("cat -n src/a.py | sed -n '1,120p'"))) == view
    # numbered lines read as a file view whatever printed them; plain program output is cut
    assert reduce_text(view, _ctx("normal", bash("./gen.sh"))) == view
    plain = "".join(f"    value_{i} = compute({i})  # a line of code\n" for i in range(1, 160))
    assert reduce_text(plain, _ctx("normal", bash("./gen.sh"))) != plain
    assert reduce_text(plain, _ctx("normal", bash("cat src/a.py"))) == plain


def test_a_long_file_view_keeps_its_outline() -> None:
    body = "".join(
        f"def function_{i}(arg):\n" + "".join(f"    statement_{i}_{j} = arg + {j}\n" for j in range(12))
        for i in range(130)
    )
    assert len(body) > FILE_VIEW_CHARS
    out = reduce_text(body, _ctx("normal", ToolCall("Read", json.dumps({"file_path": "/r/a.py"}))))
    assert len(out) < len(body)
    assert all(f"def function_{i}(arg):" in out for i in range(130))


@pytest.mark.parametrize("mode", ["normal", "aggressive"])
def test_a_read_the_agent_will_edit_stays_whole_in_every_mode(mode: str) -> None:
    """~22 KB: Claude Code's Edit/Write copy lines from all over a Read (was cut above 8,000 / 6,000)."""
    body = "".join(
        f"def function_{i}(arg):\n" + "".join(f"    statement_{i}_{j} = arg + {j}\n" for j in range(12))
        for i in range(60)
    )
    assert 20_000 < len(body) <= FILE_VIEW_CHARS
    read = ToolCall("Read", json.dumps({"file_path": "/r/a.py"}))
    assert reduce_text(body, _ctx(mode, read)) == body
    plain = body.replace("def ", "xdef ")  # the same size of plain program output is cut
    assert reduce_text(plain, _ctx(mode, bash("./gen.sh"))) != plain


def test_search_results_name_every_file() -> None:
    text = "".join(
        f"src/pkg/module_{f}.py:{n}:    needle = {f * n}  # padding padding\n"
        for f in range(40)
        for n in range(12)
    )
    out = reduce_text(text, _ctx("normal", bash("grep -rn needle src")))
    assert len(out) < len(text)
    assert all(f"src/pkg/module_{f}.py:0:" in out for f in range(40))


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ('  File "/testbed/django/db/models/base.py", line 122, in __new__', True),
        ("Traceback (most recent call last):", True),
        ("AttributeError: 'NoneType' object has no attribute 'x'", True),
        ("django.core.exceptions.ImproperlyConfigured: Requested setting", True),
        ("E       assert 3 == 2", True),
        ("E   ModuleNotFoundError: No module named 'pytz'", True),
        ("FAILED tests/test_a.py::test_broken - assert 3 == 2", True),
        ("FAIL: test_x (tests.test_mod.TestCase)", True),
        ("src/module_42.c:131:5: error: implicit declaration of function 'foo'", True),
        ('    raise ValueError("x")', False),
        ("    except KeyError:", False),
        ("class MyError(Exception):", False),
        ("  12\t    raise TypeError(msg)", False),
        ("tests/test_a.py::test_ok PASSED", False),
    ],
)
def test_error_lines(line: str, error: bool) -> None:
    assert is_error_line(line) is error


EXUNIT = (
    "Exit code 2\nRunning ExUnit with seed: 638096, max_cases: 32\n\n"
    + "".join(
        f"  {i}) test subagent rendering case {i} (SpotterWeb.SessionLiveTest)\n"
        f"     test/spotter_web/live/session_live_test.exs:{140 + i}\n"
        '     ** (ArgumentError) expected selector ".subagent-badge" to return a single element, but got none within:\n\n'
        + "     "
        + "".join(
            f'<div class="row"><a href="/s/{j}">session {j}</a><span>ok</span></div>' for j in range(12)
        )
        + "\n\n"
        for i in range(1, 4)
    )
    + "\nFinished in 1.5 seconds (0.00s async, 1.5s sync)\n12 tests, 3 failures\n"
)


@pytest.mark.parametrize("mode", ["conservative", "normal", "aggressive"])
def test_a_test_run_of_another_language_is_a_test_run_not_a_page(mode: str) -> None:
    """Seen in a recorded Claude Code session: `mix test` failures that print the page they looked at were
    slimmed as HTML, the whole log joined into one line (the failing tests' names and lines gone)."""
    call = bash("mix test test/spotter_web/live/session_live_test.exs 2>&1")
    assert classify(EXUNIT, call) == "test_run"
    out = reduce_text(EXUNIT, _ctx(mode, call))
    for line in ("12 tests, 3 failures", "     test/spotter_web/live/session_live_test.exs:142"):
        assert line in out.split("\n"), out[:600]
    assert "chars of HTML" not in out


# Codex code mode: the model's JavaScript runs the command (``tools.exec_command({cmd: ...})``)
def codex_script(cmd: str) -> ToolCall:
    return ToolCall("exec", f"const r = await tools.exec_command({{cmd: {json.dumps(cmd)}}});\ntext(r);\n")


@pytest.mark.parametrize(
    ("script", "command"),
    [
        (codex_script("cat settings_module.py").arguments, "cat settings_module.py"),
        (codex_script('grep -n "a b" x.py').arguments, 'grep -n "a b" x.py'),
        (
            "const r = await tools.exec_command({ cmd: 'ls -la src', yield_time_ms: 1000 });\ntext(r);",
            "ls -la src",
        ),
        (
            'const a = await tools.exec_command({cmd: "git diff"});\n'
            'const b = await tools.exec_command({cmd: "cat f.py"});\ntext(a); text(b);',
            "git diff\ncat f.py",
        ),
        ("text('no command here');", ""),
    ],
)
def test_a_codex_code_mode_script_names_its_commands(script: str, command: str) -> None:
    assert ToolCall("exec", script).command == command


def test_a_file_view_run_from_a_codex_script_is_kept_whole() -> None:
    """Before: the script's ``cat`` was not seen, the view read as plain output and was cut in the
    middle (Codex 0.171, default model), where ``exec_command`` called directly kept it whole."""
    plain = "".join(f"    value_{i} = compute({i})  # a line of code\n" for i in range(1, 160))
    assert kind_of_command(codex_script("cat src/a.py")) == "file_view"
    assert reduce_text(plain, _ctx("normal", codex_script("cat src/a.py"))) == plain


def test_a_timestamped_log_is_not_search_results() -> None:
    """Clock and date prefixes (``2026-11-30 12:00:00``, ``12:00:01``) once read as ``path:line:``."""
    log = "".join(
        f"2026-11-30 12:{i // 60:02d}:{i % 60:02d} INFO step {i} compiled mod_{i}.c\n" for i in range(200)
    )
    clock = "".join(f"12:{i // 60:02d}:{i % 60:02d} worker {i}: processed batch\n" for i in range(200))
    assert classify(log, bash("make")) != "search" and classify(log) != "search"
    assert classify(clock) != "search"
    grep = "".join(f"src/mod_{i}.py:{i + 3}:    needle = {i}\n" for i in range(50))
    assert (
        classify(grep) == "search" and classify("".join(f"{i}:    x = {i}\n" for i in range(50))) == "search"
    )


def test_a_long_typescript_view_keeps_its_exported_definitions() -> None:
    """A module's definitions as TypeScript writes them (``export class``, ``export const f = async
    (...) =>``, ``export interface``): the outline kept only ``function`` and bare ``class`` lines."""
    body = "".join(f"  const value{k} = compute{k}(request.params, options);\n" for k in range(12))
    heads = [
        f"export const handler{i} = async (request: Request): Promise<Response> => {{"
        if i % 3 == 0
        else f"export class Service{i} {{"
        if i % 3 == 1
        else f"export interface Options{i} {{"
        for i in range(60)
    ]
    module = "".join(f"{head}\n{body}}}\n\n" for head in heads)
    assert len(module) > FILE_VIEW_CHARS
    out = reduce_text(module, _ctx("normal", ToolCall("Read", json.dumps({"file_path": "/app/src/api.ts"}))))
    assert STUB_RE.search(out) and len(out) < len(module)
    assert all(head in out.splitlines() for head in heads)


def test_a_long_elixir_view_keeps_its_private_function_heads() -> None:
    """A 30 KB LiveView module was cut to its ``def`` lines: the ``defp`` heads two Edits then took
    their old_string from were hidden (a Claude Code trace)."""
    body = "".join(f"    value_{k} = compute_{k}(socket.assigns, opts)\n" for k in range(12))
    module = "defmodule SpotterWeb.SessionLive do\n" + "".join(
        f"  {'def' if i % 5 == 0 else 'defp'} handler_{i}(socket, opts) do\n{body}  end\n\n"
        for i in range(60)
    )
    assert len(module) > FILE_VIEW_CHARS
    out = reduce_text(module, _ctx("normal", bash("cat lib/spotter_web/live/session_live.ex")))
    assert STUB_RE.search(out) and len(out) < len(module)
    heads = [line for line in module.splitlines() if line.startswith("  defp ")]
    assert heads and all(head in out.splitlines() for head in heads)
