"""Recall of the session record's "files written" against two independent checkers, on recorded sessions.

Usage: ``python benchmarks/record_recall.py [TRACE.json.gz ...]`` (default: ../shared/traces/swe/*), or
``--continuous CHAIN.json.gz ...`` for the record of each finished task of continuous sessions.
Prints one JSON object: per-checker recall and precision, totals, and the misses.

Why two checkers, both written apart from the extractor:

- ``git``: files that ``git diff`` / ``git status`` outputs *show* as changed (the repository's own
  word, read from tool outputs, never from the commands; also a ``git diff > FILE`` shown by ``cat``);
- ``regex``: a deliberately simple scan of the command texts (redirect targets outside quotes and
  heredocs, ``sed -i``, ``tee``, ``cp``/``mv`` destinations, ``+++ b/`` lines of applied patches, and
  ``open(..., 'w')`` in Python code that is run).

The record's side is every file whose history has a create or modify action.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lightmem_plugin.eviction.entries import of_chat  # noqa: E402
from lightmem_plugin.eviction.session_record import extract  # noqa: E402

_DIFF = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.M)
_STATUS = re.compile(r"^\s+(?:modified|new file):\s+(\S+)", re.M)
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n(.*?)^\s*\1\s*$", re.M | re.S)
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", re.S)
_REDIRECT = re.compile(r"(?<![<&\d])>>?\s*([^\s;&|<>()]+)")
_SED_I = re.compile(r"\bsed\s+(?:-[a-zA-Z]*\s+)*-i\S*\s+(?:-e\s+)?(?:'[^']*'|\"[^\"]*\"|\S+)\s+([^\s;&|<>]+)")
_TEE = re.compile(r"\btee\s+(?:-a\s+)?([^\s;&|<>]+)")
_CP_MV = re.compile(r"\b(?:cp|mv)\s+(?:-\w+\s+)*\S+\s+([^\s;&|<>]+)")
_PLUS = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.M)
_OPEN_W = re.compile(r"open\(\s*['\"]([^'\"]+)['\"]\s*,\s*['\"][wa]")
_PY_RUN = re.compile(r"\bpython[\d.]*\s+(?:-\w+\s+)*([\w./-]+\.py)")


def _canon(path: str) -> str:
    path = path.strip("'\"")
    path = re.sub(r"^(?:/testbed/|\./)", "", path)
    return path


def git_truth(messages: list[dict[str, Any]]) -> set[str]:
    """Files the repository itself reported as changed in ``git diff``/``git status`` outputs."""
    commands: dict[str, str] = {}
    diff_files: set[str] = set()  # files a `git diff > FILE` wrote; catting them shows git's output too
    out: set[str] = set()
    for msg in messages:
        for call in msg.get("tool_calls") or ():
            commands[call["id"]] = call["function"]["arguments"]
            diff_files.update(
                Path(f).name for f in re.findall(r"\bgit diff[^>|;&\n]*>\s*([\w./-]+)", commands[call["id"]])
            )
        command = commands.get(msg.get("tool_call_id", ""), "")
        shows_file = any(re.search(r"\bcat\s+\S*" + re.escape(f), command) for f in diff_files)
        if msg.get("role") == "tool" and (re.search(r"\bgit (?:diff|status)\b", command) or shows_file):
            text = msg.get("content") or ""
            out.update(_canon(m.group(2)) for m in _DIFF.finditer(text))
            out.update(_canon(m.group(1)) for m in _STATUS.finditer(text))
    return out


def regex_truth(messages: list[dict[str, Any]]) -> set[str]:
    """Files the command texts write, by a simple scan independent of the record's shell reader."""
    out: set[str] = set()
    scripts: dict[str, list[str]] = {}
    patches: dict[str, list[str]] = {}
    for msg in messages:
        for call in msg.get("tool_calls") or ():
            try:
                command = str(json.loads(call["function"]["arguments"]).get("command", ""))
            except ValueError:
                continue
            bodies = {m.group(2) for m in _HEREDOC.finditer(command)}
            created = _REDIRECT.findall(_QUOTED.sub(" ", _HEREDOC.sub("\n", command)))
            for target in created:
                for body in bodies:
                    scripts[Path(target).name] = _OPEN_W.findall(body)
                    patches[Path(target).name] = _PLUS.findall(body)
            bare = _QUOTED.sub(" ", _HEREDOC.sub("\n", command))
            found = [*created, *_SED_I.findall(command), *_TEE.findall(bare), *_CP_MV.findall(bare)]
            if re.search(r"\bpython[\d.]*\s+(?:-c|-)\b", command):
                found += _OPEN_W.findall(command)
            for script in _PY_RUN.findall(bare):
                found += scripts.get(Path(script).name, [])
            if re.search(r"\b(?:patch|git apply)\b", bare):
                found += [p for b in bodies for p in _PLUS.findall(b)]
                for name, targets in patches.items():
                    if name in command:
                        found += targets
            out.update(_canon(f) for f in found if f not in ("/dev/null",) and not f.startswith("&"))
    return out


def record_written(messages: list[dict[str, Any]]) -> set[str]:
    """Files the session record says were created or modified."""
    record = extract(of_chat(messages))
    return {_canon(f.path) for f in record.files if any(a in ("create", "modify") for _, a in f.history)}


def _matches(truth: str, found: set[str]) -> bool:
    return truth in found or any(f.endswith("/" + truth) or truth.endswith("/" + f) for f in found)


def measure(paths: list[Path]) -> dict[str, Any]:
    """Recall and precision of the record against both checkers over ``paths``."""
    totals = {"git": [0, 0], "regex": [0, 0]}
    precise = [0, 0]
    misses: dict[str, list[str]] = {"git": [], "regex": []}
    for path in paths:
        with gzip.open(path) as fh:
            messages = json.loads(fh.read())["messages"]
        found = record_written(messages)
        truths = {"git": git_truth(messages), "regex": regex_truth(messages)}
        for name, truth in truths.items():
            hit = [t for t in sorted(truth) if _matches(t, found)]
            totals[name][0] += len(hit)
            totals[name][1] += len(truth)
            misses[name] += [f"{path.name}: {t}" for t in sorted(truth) if t not in hit]
        either = truths["git"] | truths["regex"]
        precise[0] += sum(1 for f in found if _matches(f, either))
        precise[1] += len(found)
    return {
        "sessions": len(paths),
        "recall_git": round(totals["git"][0] / max(1, totals["git"][1]), 4),
        "git_files": totals["git"][1],
        "recall_regex": round(totals["regex"][0] / max(1, totals["regex"][1]), 4),
        "regex_files": totals["regex"][1],
        "precision_vs_either": round(precise[0] / max(1, precise[1]), 4),
        "record_files": precise[1],
        "misses": misses,
    }


_TEST_CMD = re.compile(r"\bpytest\b|runtests\.py|\bmanage\.py test\b|\bunittest\b")
_TEST_FAILED = re.compile(
    r"\b\d+ (?:failed|errors?)\b|^FAILED |^ERROR |Traceback \(most recent|No module named|command not found",
    re.M,
)


def outcome_truth(messages: list[dict[str, Any]]) -> str | None:
    """How the last test run of ``messages`` ended, read from its output alone (None: no test run)."""
    commands: dict[str, str] = {}
    last: str | None = None
    for msg in messages:
        for call in msg.get("tool_calls") or ():
            commands[call["id"]] = call["function"]["arguments"]
        if msg.get("role") == "tool" and _TEST_CMD.search(commands.get(msg.get("tool_call_id", ""), "")):
            last = "failed" if _TEST_FAILED.search(str(msg.get("content") or "")) else "passed"
    return last


def measure_tasks(paths: list[Path]) -> dict[str, Any]:
    """Per finished task of continuous sessions (``lightmem2 continuous`` documents, which list each
    task's first message): recall of the record's files edited or created against ``git_truth`` of
    that task's messages, and agreement of its test outcome with ``outcome_truth``."""
    hit = total = tasks = agree = judged = 0
    misses: list[str] = []
    for path in paths:
        with gzip.open(path) as fh:
            doc = json.loads(fh.read())
        messages, starts = doc["messages"], [t["first_message"] for t in doc["tasks"]]
        record = extract(of_chat(messages))
        for n, finished in enumerate(record.finished):
            own = messages[starts[n] : starts[n + 1]]
            found = {_canon(f) for f in (*finished.facts.modified, *finished.facts.created)}
            truth = git_truth(own)
            tasks += 1
            total += len(truth)
            hit += sum(1 for t in truth if _matches(t, found))
            misses += [f"{path.name} task {n + 1}: {t}" for t in sorted(truth) if not _matches(t, found)]
            want = outcome_truth(own)
            if want is not None and finished.facts.tests:
                judged += 1
                agree += want == ("passed" if finished.facts.last_test_failed is None else "failed")
    return {
        "finished_tasks": tasks,
        "task_git_files": total,
        "task_recall_git": round(hit / max(1, total), 4),
        "task_outcomes_judged": judged,
        "task_outcome_agreement": round(agree / max(1, judged), 4),
        "task_misses": misses,
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["--continuous"]:
        print(json.dumps(measure_tasks([Path(a) for a in argv[1:]]), indent=2))
        return 0
    paths = [Path(a) for a in argv] or sorted((ROOT.parent / "shared" / "traces" / "swe").glob("*.json.gz"))
    print(json.dumps(measure(paths), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
