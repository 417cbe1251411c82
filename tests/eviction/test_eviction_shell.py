"""Reading shell commands: splitting, heredocs, and the file effects of the commands agents send."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem_plugin.eviction.effects import FileTracker
from lightmem_plugin.eviction.signals import apply_patch_effects
from lightmem_plugin.reduction.shell import split_commands, strip_prefixes


def argvs(text: str) -> list[list[str]]:
    return [c.argv for c in split_commands(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ls -la /testbed/", [["ls", "-la", "/testbed/"]]),
        (
            "cd /testbed && grep -n 'def foo' a.py | head -5",
            [["cd", "/testbed"], ["grep", "-n", "def foo", "a.py"], ["head", "-5"]],
        ),
        ('python -c "import a; print(\\"x\\")"', [["python", "-c", 'import a; print("x")']]),
        ("echo a; echo b\necho c", [["echo", "a"], ["echo", "b"], ["echo", "c"]]),
        ("cat f.txt # a comment\nls", [["cat", "f.txt"], ["ls"]]),
        (
            "find . -name '*.py' -exec grep -l X {} \\;",
            [["find", ".", "-name", "*.py", "-exec", "grep", "-l", "X", "{}", ";"]],
        ),
        (
            "echo $(cat x | wc -l) && A=1 python t.py",
            [["echo", "$(cat x | wc -l)"], ["A=1", "python", "t.py"]],
        ),
        ('a="x y"z', [["a=x yz"]]),
    ],
)
def test_split_commands(text: str, expected: list[list[str]]) -> None:
    assert argvs(text) == expected


def test_heredocs_and_redirects() -> None:
    text = "cat <<A > a.txt; cat <<'B' >> b.txt\nalpha\nA\nbeta $x\nB\npython a.txt 2>&1 | tail -3"
    cmds = split_commands(text)
    assert [(c.argv, c.redirects, c.stdin_text) for c in cmds[:2]] == [
        (["cat"], [(">", "a.txt")], "alpha\n"),
        (["cat"], [(">>", "b.txt")], "beta $x\n"),
    ]
    assert cmds[2].argv == ["python", "a.txt"] and cmds[2].redirects == [(">&", "1")]
    assert cmds[3].argv == ["tail", "-3"] and cmds[3].piped_in


def test_unterminated_heredoc_and_quote_do_not_raise() -> None:
    assert split_commands("cat > f << EOF\nno end")[0].stdin_text == "no end"
    assert split_commands("echo 'open")[0].argv[0] == "echo"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["timeout", "-s", "9", "60", "python", "x.py"], ["python", "x.py"]),
        (["PYTHONPATH=src", "sudo", "pytest"], ["pytest"]),
        (["then", "echo", "x"], ["echo", "x"]),
    ],
)
def test_strip_prefixes(argv: list[str], expected: list[str]) -> None:
    assert strip_prefixes(argv) == expected


@pytest.mark.parametrize(
    ("command", "kind", "reads", "writes", "whole"),
    [
        ("cat /testbed/a/b.py", "read", ["a/b.py"], [], []),
        ("cd /testbed && sed -n '10,20p' src/x.py", "read", ["src/x.py"], [], []),
        (
            "grep -n 'visit_' astroid/nodes/as_string.py | head",
            "read",
            ["astroid/nodes/as_string.py"],
            [],
            [],
        ),
        ("grep -rn 'visit_' astroid/", "explore", [], [], []),
        ("find . -name '*.py' | xargs grep -l foo", "explore", [], [], []),
        ("sed -i 's/a/b/g' src/m.py src/n.py", "write", [], ["src/m.py", "src/n.py"], []),
        ("cd /testbed && cat > repro.py << 'EOF'\nprint(1)\nEOF", "write", [], ["repro.py"], ["repro.py"]),
        ("echo hi >> notes.txt", "write", [], ["notes.txt"], []),
        ("python -m pytest tests/test_a.py -x 2>&1 | tail -20", "test", [], [], []),
        ("pip install -e . 2>&1 | tail", "install", [], [], []),
        ("cp a.py a.py.backup", "write", ["a.py"], ["a.py.backup"], ["a.py.backup"]),
        ("mv /tmp/new.py ./pkg/mod.py", "write", [], ["pkg/mod.py"], ["pkg/mod.py"]),
        ("echo x | tee out.log", "write", [], ["out.log"], []),
        ("rm -f junk.py", "write", [], [], []),
        ("git diff -- a.py > patch.txt", "write", [], ["patch.txt"], ["patch.txt"]),
        ("git status", "vcs", [], [], []),
        ("git checkout -- src/a.py", "write", [], ["src/a.py"], []),
        ("git checkout v2.9.0 -- astroid/modutils.py", "write", [], ["astroid/modutils.py"], []),
        ("git checkout HEAD~1 src/a.py src/b.py", "write", [], ["src/a.py", "src/b.py"], []),
        ("git checkout v2.9.0", "vcs", [], [], []),
        ("git checkout -b fix-1.2", "vcs", [], [], []),
        ("git restore --source v1.0 src/a.py", "write", [], ["src/a.py"], []),
        ("git -C /testbed checkout src/a.py", "write", [], ["src/a.py"], []),
        # opened 'w' and not read: the whole file is new content; 'a' appends to what was there
        ("python -c \"open('cfg.ini', 'w').write('x')\"", "run", [], ["cfg.ini"], ["cfg.ini"]),
        ("python -c \"open('log.txt', 'a').write('x')\"", "run", [], ["log.txt"], []),
        (
            "python -c \"from pathlib import Path; Path('o.txt').write_text('x')\"",
            "run",
            [],
            ["o.txt"],
            ["o.txt"],
        ),
        ("python - <<'EOF'\nwith open('data.json') as f:\n    pass\nEOF", "run", ["data.json"], [], []),
        ("bash -c 'cat a.py > b.py'", "write", ["a.py"], ["b.py"], ["b.py"]),
    ],
)
def test_effects(command: str, kind: str, reads: list[str], writes: list[str], whole: list[str]) -> None:
    tracker = FileTracker()
    tracker.workdir = "/testbed"
    fx = tracker.shell(command)
    assert (fx.kind, fx.reads, fx.writes, fx.whole) == (kind, reads, writes, whole)


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("cd /app && mix test test/a_test.exs 2>&1 | tail -20", "test"),
        ("go test ./...", "test"),
        ("cargo test --lib", "test"),
        ("npm test", "test"),
        ("npx --yes vitest run", "test"),
        ("bundle exec rspec spec/a_spec.rb", "test"),
        ("uv run pytest -x", "test"),
        ("./gradlew :app:test", "test"),
        ("/usr/bin/make check", "test"),
        # not a test run: installing a test tool, printing a command's name, a build
        ("pip install pytest", "install"),
        ("npm install", "install"),
        ("yarn add --dev jest", "install"),
        ("echo make test", "other"),
        ("npm run build", "install"),
        ("gradle build", "other"),
    ],
)
def test_a_test_run_of_any_language_is_a_test(command: str, kind: str) -> None:
    """The session record counts the task's test runs and says how the last one ended; it knew only
    Python's runners, so a finished Elixir task's summary named no `mix test` at all."""
    assert FileTracker().shell(command).kind == kind


def test_rm_is_a_delete_and_grep_rc1_is_benign() -> None:
    tracker = FileTracker()
    assert tracker.shell("rm -f junk.py").deletes == ["junk.py"]
    assert tracker.shell("grep -n x a.py").benign_rc1
    assert not tracker.shell("python a.py").benign_rc1


def test_scripts_written_earlier_are_followed_when_run() -> None:
    tracker = FileTracker()
    tracker.shell(
        "cd /testbed && cat > fix.py << 'EOF'\npath = 'pkg/mod.py'\nwith open(path, 'r') as f:\n"
        "    s = f.read()\nwith open(path, 'w') as f:\n    f.write(s)\nEOF"
    )
    fx = tracker.shell("cd /testbed && python fix.py")
    assert fx.writes == ["pkg/mod.py"] and fx.reads == ["pkg/mod.py"] and fx.kind == "run"
    assert fx.whole == []  # read and written back: an edit of the module, not a new file


def test_patches_written_earlier_are_followed_when_applied() -> None:
    tracker = FileTracker()
    tracker.shell(
        "cd /testbed && cat > fix.patch << 'EOF'\n"
        "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n-a\n+b\nEOF"
    )
    assert tracker.shell("cd /testbed && patch -p1 < fix.patch").writes == ["pkg/mod.py"]
    assert tracker.shell("cd /testbed && git apply fix.patch").writes == ["pkg/mod.py"]


def test_apply_patch_envelope() -> None:
    fx = apply_patch_effects(
        FileTracker(), "*** Begin Patch\n*** Update File: a.py\n*** Add File: b.py\n*** Delete File: c.py\n"
    )
    assert (fx.writes, fx.whole, fx.deletes) == (["a.py", "b.py"], ["b.py"], ["c.py"])


def test_workdir_is_the_first_cd_outside_tmp() -> None:
    tracker = FileTracker()
    tracker.shell("cd /tmp/scratch && touch x.py")
    tracker.shell("cd /repo && cat src/a.py")
    assert tracker.workdir == "/repo"
    assert tracker.shell("cat /repo/src/a.py /etc/hosts").reads == ["src/a.py", "/etc/hosts"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab c'\"\\$()|&;<>\n#`=-EOF")), max_size=80))
def test_any_text_splits_without_error(text: str) -> None:
    for command in split_commands(text):
        assert command.argv or command.redirects or command.stdin_text is not None
    FileTracker().shell(text)
