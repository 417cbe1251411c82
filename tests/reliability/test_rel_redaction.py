"""Redaction: every built-in kind is caught, ordinary output is left alone, and the cost is linear.

The timing tests are the guard against catastrophic backtracking: a 5 MB single line built to make
each rule work hardest must finish within a few seconds, and quadrupling the input must not cost much
more than four times as much (a quadratic rule would cost sixteen).
"""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_secrets import NEGATIVES, SAMPLES, all_secrets_text

from lightmem_plugin.errors import ConfigError
from lightmem_plugin.security.redaction import KINDS, Redactor
from lightmem_plugin.security.redaction_rules import RULES

R = Redactor()


def test_more_than_fifty_kinds_each_with_a_sample() -> None:
    assert len(KINDS) >= 50
    assert set(KINDS) <= {kind for kind, _, _ in SAMPLES}


@pytest.mark.parametrize(
    ("kind", "text", "secret"), SAMPLES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SAMPLES)]
)
def test_sample_is_redacted_as_its_kind_and_nothing_else_changes(kind: str, text: str, secret: str) -> None:
    out = R.redact(text)
    tag = f"[REDACTED:{kind}]"
    assert secret not in out
    assert tag in out
    before, _, after = out.partition(tag)
    assert text.startswith(before) and text.endswith(after)


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_output_is_unchanged(text: str) -> None:
    assert R.redact(text) == text


def test_all_kinds_in_one_output_none_survives_and_redaction_is_idempotent() -> None:
    text = all_secrets_text()
    out = R.redact(text)
    assert [kind for kind, _, secret in SAMPLES if secret in out] == []
    assert R.redact(out) == out
    assert Redactor().redact(text) == out  # deterministic across instances


def test_random_base64_blob_is_left_alone() -> None:
    import random

    rnd = random.Random(7)
    blob = "".join(
        rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(200_000)
    )
    text = f"data:image/png;base64,{blob}"
    assert R.redact(text) == text


def test_invalid_utf8_text_is_still_redacted_and_other_bytes_kept() -> None:
    """Regression: bytes that were not valid UTF-8 (a lone surrogate written with surrogatepass, a stray
    Latin-1 byte) used to skip redaction entirely, so one odd byte let every secret reach disk."""
    lone = "caf\udce9 \ud800 output\n".encode("utf-8", "surrogatepass")
    _kind, text, secret = next(row for row in SAMPLES if row[0] == "github_pat")
    data = lone + text.encode() + b"\xff\xfe tail"
    out = R.redact_bytes(data)
    assert secret.encode() not in out
    assert out.startswith(lone) and out.endswith(b"\xff\xfe tail")
    assert b"[REDACTED:github_pat]" in out


def test_binary_data_passes_unchanged() -> None:
    _kind, text, _secret = next(row for row in SAMPLES if row[0] == "github_pat")
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + text.encode() + b"\x00" * 16
    assert R.redact_bytes(png) == png


def test_disabled_redactor_changes_nothing() -> None:
    text = all_secrets_text()
    assert Redactor(enabled=False).redact(text) == text
    assert Redactor(enabled=False).redact_bytes(text.encode()) == text.encode()


def test_extra_patterns_and_excluded_kinds() -> None:
    r = Redactor(extra_patterns=[r"ACME-[0-9]{6}"], exclude_kinds=["jwt", "database_url"])
    assert r.redact("id ACME-123456 ok") == "id [REDACTED:custom] ok"
    jwt_text = next(text for kind, text, _ in SAMPLES if kind == "jwt")
    assert r.redact(jwt_text) == jwt_text
    db = "postgresql://app:pw12345@db/prod"
    assert r.redact(db) == db
    assert Redactor().redact(db) == "postgresql://app:[REDACTED:database_url]@db/prod"


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"extra_patterns": ["(unclosed"]}, r"extraPatterns\[0\]"),
        ({"exclude_kinds": ["nope"]}, 'kind "nope"'),
    ],
)
def test_bad_configuration_is_a_one_line_config_error(kwargs: dict[str, list[str]], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as info:
        Redactor(**kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


SEPARATED = st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SAMPLES), SEPARATED, SEPARATED)
def test_secret_is_redacted_whatever_surrounds_its_line(
    row: tuple[str, str, str], pre: str, post: str
) -> None:
    _kind, text, secret = row
    out = R.redact(f"{pre}\n{text}\n{post}")
    assert secret not in out


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_redaction_never_raises_and_is_idempotent(text: str) -> None:
    once = R.redact(text)
    assert R.redact(once) == once
    R.redact_bytes(text.encode("utf-8", "surrogatepass"))


def _adversarial(n: int) -> dict[str, str]:
    """Inputs that make a backtracking rule quadratic: repeated prefixes, long runs after a prefix."""
    needles = sorted({needle for _, _, ns in RULES for needle in ns})
    base = {
        "run_A": "A" * n,
        "sk_runs": "sk-" * (n // 3),
        "jwt_parts": "eyJaaaaaaaaa." * (n // 13),
        "url_creds": "://a:" * (n // 5),
        "env_lines": "\nTOKEN" * (n // 6),
        "password_eq": "password=" * (n // 9),
        "pem_headers": "-----BEGIN RSA PRIVATE KEY-----" * (n // 31),
        "key_run": "api-key: " + "a" * n,
        "secret_run": "secret" + "A" * n,
        "command_args": "curl -u " * (n // 8),
        "kube_kinds": "kind: Secret\n" * (n // 13),
        "xml_tags": "<password>" * (n // 10),
        "pgpass_fields": "a:1:b:c:" * (n // 8),
        "keyed_values": ("webhookSecret: " + "aB3dE9fG1hJ2kL4m" * 2 + "\n") * (n // 48),
        "needles": (" ".join(needles) * (n // 1000 + 1))[:n],
    }
    return base


def _cost(text: str) -> float:
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        R.redact(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_adversarial(10)))
def test_cost_grows_linearly(name: str) -> None:
    small = _cost(_adversarial(250_000)[name])
    large = _cost(_adversarial(1_000_000)[name])
    assert large < 8 * small + 0.05, f"{name}: {small:.3f}s for 250k chars, {large:.3f}s for 1M chars"


@pytest.mark.slow
def test_five_megabyte_single_line_is_bounded() -> None:
    """Measured here: about 2 s for the worst 5 MB line (0.4 us/char); the bound leaves CI headroom."""
    needles = " ".join(sorted({needle for _, _, ns in RULES for needle in ns}))
    line = (needles + " ") + "Ab0+/" * 1_000_000
    assert "\n" not in line and len(line) > 5_000_000
    start = time.perf_counter()
    R.redact(line)
    assert time.perf_counter() - start < 12.0


PADDING = "".join(f"step {i}: compiled module_{i}.py ok\n" for i in range(12))
FORMS = {
    "cat -n": lambda t: "".join(f"{n:6}\t{line}\n" for n, line in enumerate(t.splitlines(), 1)),
    "Read": lambda t: "".join(f"{n:6}\u2192{line}\n" for n, line in enumerate(t.splitlines(), 1)),
    "grep -rn": lambda t: "".join(
        f"deploy/app.yaml:{n}:{line}\n" for n, line in enumerate(t.splitlines(), 1)
    ),
    "grep -n": lambda t: "".join(f"{n}:{line}\n" for n, line in enumerate(t.splitlines(), 1)),
    "diff": lambda t: "@@ -0,0 +1,40 @@\n" + "".join(f"+{line}\n" for line in t.splitlines()),
    "JSON": lambda t: json.dumps({"exit_code": 0, "output": t}),
    "JSON, cut": lambda t: json.dumps({"exit_code": 0, "output": t})[:-2],
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_secret_is_redacted_as_a_tool_shows_its_file(form: str) -> None:
    """Before, 5 to 7 kinds passed when each line had a line number, ``path:N:`` or a diff's ``+``
    before it (the rules that read a line's start or a block of lines: a Kubernetes Secret's data
    block, a PuTTY or OpenVPN key, pgpass, Set-Cookie, ``KEY = value``), 19 in a JSON string; the
    search index kept them in plaintext."""
    missed = sorted({k for k, t, s in SAMPLES if s in R.redact(FORMS[form](PADDING + t + "\n" + PADDING))})
    assert missed == []


LINE_FORMS = ["cat -n", "Read", "grep -rn", "grep -n", "diff"]
MARK = re.compile(r"^(?:\s*\d+[\t\u2192]|deploy/app\.yaml:\d+:|\d+:|\+|@@ .*)")


def _marks(text: str) -> list[str]:
    return [m.group(0) if (m := MARK.match(line)) else "" for line in text.splitlines()]


@pytest.mark.parametrize("form", LINE_FORMS)
def test_a_decorated_text_keeps_its_lines_and_marks(form: str) -> None:
    """A secret found in a view is replaced where it stands, line by line: the text keeps its line
    count (the search index numbers lines as ``recover`` does) and every line its mark."""
    _kind, text, secret = next(row for row in SAMPLES if row[0] == "kubernetes_secret")
    shown = FORMS[form](PADDING + text + PADDING)
    out = R.redact(shown)
    assert secret not in out and "[REDACTED:kubernetes_secret]" in out
    assert len(out.splitlines()) == len(shown.splitlines())
    assert _marks(out) == _marks(shown)
    assert R.redact(out) == out


@pytest.mark.parametrize("form", LINE_FORMS)
def test_ordinary_output_shown_by_a_tool_is_unchanged(form: str) -> None:
    changed = [
        text for text in NEGATIVES if R.redact(shown := FORMS[form](PADDING + text + "\n" + PADDING)) != shown
    ]
    assert changed == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([*(t for _k, t, _s in SAMPLES[::7]), "ok", "", "  x: 1"]), max_size=6),
    st.text(max_size=80),
    st.sampled_from(sorted(FORMS)),
)
def test_views_never_raise_and_keep_redaction_idempotent(rows: list[str], noise: str, form: str) -> None:
    shown = FORMS[form]("\n".join([*rows, noise]))
    once = R.redact(shown)
    assert R.redact(once) == once
    if form in LINE_FORMS:
        assert len(once.splitlines()) <= len(shown.splitlines())
