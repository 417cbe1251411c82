"""The built-in credential patterns of :mod:`lightmem_plugin.security.redaction`, as data.

Why they look the way they do: tool output can be one 5 MB line, and Python's ``re`` backtracks.
Every rule is linear in the text: a token rule starts with a literal and a look-behind that refuses to
start inside a run of token characters (so a run of ``n`` characters is scanned once, not ``n`` times),
repeats are possessive (``*+``, ``{m,}+``) or bounded, and each rule has lowercase needles: when none
occurs in the text the rule is skipped. Rules run in table order; specific kinds come before the
generic ``key=value`` ones. Each row is (kind, regex, needles); a regex with groups named ``s``,
``s1``, ``s2``, ... has only that group replaced, so the key name stays readable. Two kinds need more
than a regex: ``generic_secret`` (any key whose name says secret, when its value looks random: a
regex cannot measure entropy, so :data:`CHECKS` tests each match) and ``kubernetes_secret`` (every
value of a Secret's ``data:`` block: :data:`INNER` replaces each one inside the matched block).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable

_T = "A-Za-z0-9_-"  # token characters
_V = r"""(?!\[REDACTED:)"""  # never re-redact a tag


def _tok(prefix: str, body: str, boundary: str = _T) -> str:
    """A token that starts with literal ``prefix`` not preceded by a ``boundary`` character."""
    lit = re.escape(prefix)
    return f"{lit}(?<![{boundary}]{lit}){body}"


def _bounded(body: str, boundary: str = "A-Za-z0-9") -> str:
    """A token whose first character is a class: look-behind first, not-followed-by at the end."""
    return f"(?<![{boundary}]){body}(?![{boundary}])"


# Values after ``key=`` / ``key:``: a quoted string, or a bare word that is not code. A bare word of
# letters only (``password = secret_value``) or a name followed by ``.``, ``(`` or ``[`` (an attribute,
# call or index) is a variable, not a secret: redacting it would corrupt archived source code.
_BARE_END = r"""[\s"'`,;)}\]>(\[]"""
_VALUE = (
    r"""(?:"(?!\[REDACTED:)(?P<s1>[^"\\\n]{1,512})"|'(?!\[REDACTED:)(?P<s2>[^'\\\n]{1,512})'"""
    r"""|(?!\[REDACTED:)(?![A-Za-z_][A-Za-z_.]*+(?:"""
    + _BARE_END
    + r"""|$))(?![A-Za-z_][A-Za-z0-9_]*+[.(\[])(?![$<{*%])(?P<s3>[^\s"'`,;)}\]>]{3,512}+))"""
)
_SEP = r"""["']?[ \t]*+(?:=>(?=[ \t]*+["'])|[:=])[ \t]*+"""
"""Between a key and its value: ``:``, ``=``, or ``=>`` (PHP, Ruby) before a quoted string only, since
``token => !token`` is a lambda."""
_SECRET_WORDS = (
    r"SECRET(?![A-Z])|TOKEN(?![A-Z])|PASSW|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH(?!OR)"
    r"|_PAT\b|_KEY\b"
    r"|DSN\b|CONN(?:ECTION)?_?STR"
)
_ENV_KEY = rf"(?=[A-Z0-9_]{{0,64}}?(?:{_SECRET_WORDS}))[A-Z][A-Z0-9_]{{0,127}}+"
DB_SCHEME_RE = re.compile(
    r"(?i)(?<![A-Za-z0-9+.-])(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver"
    r"|clickhouse|cockroachdb|couchdb|neo4j(?:\+s)?|snowflake|oracle|db2|cassandra)(?:\+[a-z0-9]{1,20})?$"
)
"""A database URL scheme right before ``://``: such URL credentials are kind ``database_url``."""
SCHEME_WINDOW = 40


def _cmd(names: tuple[str, ...], flag: str, args: str = r"[^\s|;&<>]++", suffix: str = "") -> str:
    """``flag`` among the first 40 arguments of a command named ``names`` (then ``suffix``) on one line.

    Each name is a literal checked by a look-behind after it (so ``re`` can scan for the literal), and
    each argument is taken whole (possessive): a command is scanned once per place it is named.
    """
    named = "|".join(f"{re.escape(n)}(?<![A-Za-z0-9_.-]{re.escape(n)})" for n in names)
    return rf"(?:{named}){suffix}(?:[ \t]++{args}){{0,40}}?[ \t]++{flag}"


_ARG = _V + r"""["']?(?![$%-])(?P<s>[^\s"']{1,256}+)"""
"""A password argument: not a ``$VAR`` or ``%VAR%`` reference, nor the next flag."""
_PLAIN_NOT = (
    r"(?i:str|string|bytes|int|bool|boolean|any|none|null|nil|true|false|yes|no|on|off|optional|secretstr"
    r"|secretbytes|text|required|invalid|incorrect|missing|wrong|expired|empty|unset|undefined|unknown"
    r"|hidden|redacted|masked|omitted|sensitive|object|number|char|varchar|prompt|default|changed|updated"
    r"|reset|env|file|stdin)"
)
"""Words after ``password:`` that are a type (``password: str`` in a class body) or a status, not a value."""
_KUBE_BLOCK = r"(?P<s>(?:(?P=i)[ \t]++[^\n]*+(?:\n|$))++)"
_GENERIC_VALUE = r"[A-Za-z0-9+/_.~-]{16,1024}+=*+"
_GENERIC_WORDS = (
    "secret",
    "token",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "key",
    "credential",
    "credentials",
    "auth",
)
_GENERIC_KEY = "(?:" + "|".join(f"{w}|{w.capitalize()}|{w.upper()}" for w in _GENERIC_WORDS) + ")"
"""The last word of a key name, in each case style (spelled out: ``(?i)`` would stop ``re`` scanning for
the first letters). The rest of the name, before it, is read by :func:`looks_random`."""
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_KEY_QUALIFIERS = (
    "api", "secret", "private", "access", "signing", "encryption", "master", "auth", "client", "app", "service",
    "license", "account", "session", "webhook", "hmac", "jwt", "crypto", "cipher", "aes", "shared", "server",
    "admin", "write", "read", "ingest", "deploy", "subscription", "sdk", "consumer", "integration", "partner",
    "merchant", "developer", "user", "project", "storage", "rest", "live", "prod", "sign", "enc", "decrypt",
)  # fmt: skip
"""A key named ``...key`` is a credential only after one of these (not ``cache_key``, ``public_key``)."""
_TOKEN_NOT = (
    "next", "page", "continuation", "pagination", "cursor", "sync", "resume", "marker", "offset", "delta",
    "poll", "eos", "bos", "pad", "unk", "sep", "cls", "mask", "special", "start", "end", "stop",
)  # fmt: skip
"""A ``...token`` that is a page cursor or a tokenizer's special token, not a credential."""
_FILE_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")
_LOWER_RUN = re.compile(r"[a-z]{4}")
_DOTTED_NAME = re.compile(r"[A-Za-z_$][\w$]*+(?:\.[A-Za-z_$][\w$]*+)++")


def entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def key_before(text: str, end: int, limit: int = 64) -> str | None:
    """The key name (a run of letters, digits, ``_.-``) that ends at ``end``; None when it is longer."""
    start = end
    while start > 0 and text[start - 1] in _KEY_CHARS:
        start -= 1
        if end - start > limit:
            return None
    return text[start:end]


def looks_random(m: re.Match[str], value: str) -> bool:
    """Whether ``value`` is a credential: the name of the key it is assigned to says so (it ends with the
    matched word) and the value is random (16+ chars, letters and digits interleaved, high entropy),
    not a word, path, dotted name or flag."""
    key = key_before(m.string, m.end("k"))
    if key is None:
        return False
    name = re.sub(r"[^a-z0-9]", "", key.lower())
    if name.endswith("key"):
        if not name[:-3].endswith(_KEY_QUALIFIERS):
            return False
    elif name.endswith("token") and name[:-5].endswith(_TOKEN_NOT):
        return False
    v = value.rstrip("=")
    if len(v) < 16 or v[0] in "/.~-" or "//" in v or _FILE_EXT.search(v) or _DOTTED_NAME.fullmatch(v):
        return False
    if not any(c.isdigit() for c in v) or not any(c.isalpha() for c in v):
        return False
    # Letters and digits interleave in a random value; a name keeps its digits in one place, as in
    # Ed25519PrivateKey or RSAPrivateKey2048 (two changes, and a run of lowercase letters: a word).
    mixes = sum(1 for a, b in itertools.pairwise(v) if a.isdigit() != b.isdigit() and (a + b).isalnum())
    if mixes < 2 or (mixes == 2 and _LOWER_RUN.search(v)):
        return False
    return entropy(v) >= min(3.5, math.log2(len(v)) - 0.7)


# (kind, regex, needles). A rule whose regex has groups named s, s1, s2, ... replaces only that group.
RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "private_key",
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=\s:,.()\\]|-(?!----))*+"
        r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
        ("private key",),
    ),
    ("putty_private_key", r"Private-Lines: [0-9]{1,4}(?:\r?\n[A-Za-z0-9+/=]{1,128}+)*+", ("private-lines",)),
    ("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}", ("age-secret-key",)),
    (
        "openvpn_static_key",
        r"-----BEGIN OpenVPN Static key V1-----[0-9a-fA-F\s]*+(?:-----END OpenVPN Static key V1-----)?",
        ("openvpn static key",),
    ),
    (
        "kubernetes_secret",
        r"(?m)^(?P<i>[ \t]*+)kind: Secret[ \t]*+\r?\n(?:(?!---|[ \t]*+kind:|(?P=i)(?:data|stringData):)[^\n]*+\n){0,200}?"
        r"(?P=i)(?:data|stringData):[ \t]*+\r?\n" + _KUBE_BLOCK,
        ("kind: secret",),
    ),
    (
        "kubernetes_secret",
        r"(?m)^(?P<i>[ \t]*+)data:[ \t]*+\r?\n" + _KUBE_BLOCK + r"(?<=\n)(?P=i)kind: Secret\b",
        ("kind: secret",),
    ),
    (
        "hex_private_key",
        r"(?:[Pp]rivate|PRIVATE)(?<![A-Za-z0-9].{7})[ _-]?(?:[Kk]ey|KEY)[\"']?[ \t]*+[:=][ \t]*+[\"']?"
        + _V
        + r"(?:0[xX])?(?P<s>[0-9a-fA-F]{64})(?![0-9A-Za-z])",
        ("private key", "private_key", "privatekey", "private-key"),
    ),
    (
        "wireguard_key",
        r"(?:PrivateKey(?<![A-Za-z0-9_.-]PrivateKey)|PresharedKey(?<![A-Za-z0-9_.-]PresharedKey))[ \t]*+=[ \t]*+"
        + _V
        + r"(?P<s>[A-Za-z0-9+/]{43}=)(?![A-Za-z0-9+/=])",
        ("privatekey", "presharedkey"),
    ),
    (
        "aws_credentials_csv",
        r"Access key ID,Secret access key[^\r\n]{0,512}+\r?\n" + _V + r"(?P<s>[^\r\n]{1,4096}+)",
        ("secret access key",),
    ),
    (
        "aws_access_key_id",
        _bounded(r"(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA|AIPA|ANPA|ANVA|APKA|AGPA)[A-Z0-9]{16}"),
        ("akia", "asia", "abia", "acca", "aroa", "aida", "aipa", "anpa", "anva", "apka", "agpa"),
    ),
    (
        "aws_secret_access_key",
        rf"(?i)(?:aws_?secret_?(?:access_?)?key|secretaccesskey){_SEP}[\"']?(?P<s>[A-Za-z0-9/+=]{{40}})"
        r"(?![A-Za-z0-9/+=])",
        ("secret",),
    ),
    (
        "aws_session_token",
        rf"(?i)(?:aws_?session_?token|sessiontoken|aws_?security_?token){_SEP}[\"']?"
        r"(?P<s>[A-Za-z0-9/+=]{16,}+)",
        ("token",),
    ),
    ("gcp_api_key", _tok("AIza", r"[0-9A-Za-z_-]{35}"), ("aiza",)),
    ("gcp_private_key_id", r'"private_key_id"[ \t]*+:[ \t]*+"(?P<s>[0-9a-f]{40})"', ("private_key_id",)),
    ("gcp_oauth_client_secret", _tok("GOCSPX-", r"[A-Za-z0-9_-]{28}"), ("gocspx-",)),
    ("google_oauth_token", _tok("ya29.", r"[A-Za-z0-9_-]{20,}+"), ("ya29.",)),
    ("google_refresh_token", _tok("1//0", r"[A-Za-z0-9_-]{40,}+", "A-Za-z0-9_/-"), ("1//0",)),
    ("azure_storage_key", r"(?i)AccountKey=(?P<s>[A-Za-z0-9+/]{80,100}={0,2})", ("accountkey=",)),
    ("azure_shared_access_key", r"(?i)SharedAccessKey=(?P<s>[A-Za-z0-9+/=]{20,}+)", ("sharedaccesskey=",)),
    ("azure_sas_signature", r"(?i)[?&]sig=(?P<s>[A-Za-z0-9%+/=]{20,}+)", ("sig=",)),
    (
        "azure_client_secret",
        _bounded(r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}", "A-Za-z0-9_~.-"),
        ("q~",),
    ),
    ("lightmem2_gateway_token", _tok("lm2_", r"[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"), ("lm2_",)),
    ("github_pat", _tok("ghp_", r"[A-Za-z0-9]{36,}+"), ("ghp_",)),
    ("github_oauth_token", _tok("gho_", r"[A-Za-z0-9]{36,}+"), ("gho_",)),
    ("github_user_token", _tok("ghu_", r"[A-Za-z0-9]{36,}+"), ("ghu_",)),
    ("github_server_token", _tok("ghs_", r"[A-Za-z0-9]{36,}+"), ("ghs_",)),
    ("github_refresh_token", _tok("ghr_", r"[A-Za-z0-9]{36,}+"), ("ghr_",)),
    ("github_fine_grained_pat", _tok("github_pat_", r"[A-Za-z0-9_]{50,}+"), ("github_pat_",)),
    ("gitlab_pat", _tok("glpat-", r"[A-Za-z0-9_-]{20,}+"), ("glpat-",)),
    ("gitlab_pipeline_token", _tok("glptt-", r"[A-Za-z0-9_-]{20,}+"), ("glptt-",)),
    ("gitlab_runner_token", _tok("glrt-", r"[A-Za-z0-9_-]{20,}+"), ("glrt-",)),
    ("gitlab_deploy_token", _tok("gldt-", r"[A-Za-z0-9_-]{20,}+"), ("gldt-",)),
    ("gitlab_feed_token", _tok("glft-", r"[A-Za-z0-9_-]{20,}+"), ("glft-",)),
    ("gitlab_oauth_secret", _tok("gloas-", r"[A-Za-z0-9_-]{20,}+"), ("gloas-",)),
    ("gitlab_runner_registration", _tok("GR1348941", r"[A-Za-z0-9_-]{20,}+"), ("gr1348941",)),
    ("slack_config_token", _tok("xoxe.xox", r"[bp]-[A-Za-z0-9-]{10,}+", "A-Za-z0-9_.-"), ("xoxe.",)),
    ("slack_bot_token", _tok("xoxb-", r"[A-Za-z0-9-]{10,}+"), ("xoxb-",)),
    ("slack_user_token", _tok("xoxp-", r"[A-Za-z0-9-]{10,}+"), ("xoxp-",)),
    (
        "slack_token",
        _tok("xox", r"[aores]-[A-Za-z0-9-]{10,}+"),
        ("xoxa-", "xoxo-", "xoxr-", "xoxe-", "xoxs-"),
    ),
    ("slack_app_token", _tok("xapp-", r"[0-9]-[A-Za-z0-9-]{10,}+"), ("xapp-",)),
    (
        "slack_webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]{20,}+)",
        ("hooks.slack.com",),
    ),
    ("discord_webhook", r"/api/webhooks/[0-9]{5,30}/(?P<s>[A-Za-z0-9_-]{20,}+)", ("/api/webhooks/",)),
    ("anthropic_admin_key", _tok("sk-ant-admin", r"[0-9]{2}-[A-Za-z0-9_-]{20,}+"), ("sk-ant-admin",)),
    ("anthropic_key", _tok("sk-ant-", r"[A-Za-z0-9_-]{20,}+"), ("sk-ant-",)),
    ("openrouter_key", _tok("sk-or-v1-", r"[A-Za-z0-9]{32,}+"), ("sk-or-",)),
    ("openai_admin_key", _tok("sk-admin-", r"[A-Za-z0-9_-]{20,}+"), ("sk-admin-",)),
    (
        "openai_key",
        _tok("sk-", r"(?:(?:proj|svcacct)-[A-Za-z0-9_-]{20,}+|(?=[A-Za-z]*+[0-9])[A-Za-z0-9]{20,}+)"),
        ("sk-",),
    ),
    ("mapbox_secret_token", _tok("sk.eyJ", r"[A-Za-z0-9_-]{20,}+\.[A-Za-z0-9_-]{20,}+"), ("sk.eyj",)),
    ("stripe_secret_key", _tok("sk_", r"(?:live|test)_[A-Za-z0-9]{16,}+"), ("sk_live_", "sk_test_")),
    ("stripe_restricted_key", _tok("rk_", r"(?:live|test)_[A-Za-z0-9]{16,}+"), ("rk_live_", "rk_test_")),
    ("stripe_webhook_secret", _tok("whsec_", r"[A-Za-z0-9]{24,}+"), ("whsec_",)),
    ("twilio_api_key", _bounded(r"SK[0-9a-fA-F]{32}"), ("sk",)),
    (
        "twilio_auth_token",
        rf"(?i)twilio[A-Za-z_ -]{{0,20}}token{_SEP}[\"']?(?P<s>[0-9a-f]{{32}})(?![0-9a-f])",
        ("twilio",),
    ),
    ("sendgrid_key", _tok("SG.", r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", "A-Za-z0-9_.-"), ("sg.",)),
    ("mailgun_key", _tok("key-", r"[0-9a-f]{32}(?![0-9a-f])"), ("key-",)),
    ("mailchimp_key", _bounded(r"[0-9a-f]{32}-us[0-9]{1,2}"), ("-us",)),
    ("npm_token", _tok("npm_", r"[A-Za-z0-9]{36,}+"), ("npm_",)),
    ("npmrc_auth", r"(?i)_auth(?:Token)?[ \t]*+=[ \t]*+" + _V + r"(?P<s>[^\s\"']{8,}+)", ("_auth",)),
    ("pypi_token", _tok("pypi-Ag", r"[A-Za-z0-9_-]{50,}+"), ("pypi-ag",)),
    ("huggingface_token", _tok("hf_", r"[A-Za-z0-9]{34,}+"), ("hf_",)),
    ("digitalocean_token", _tok("do", r"[opr]_v1_[a-f0-9]{64}"), ("_v1_",)),
    ("shopify_token", _tok("shp", r"(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"), ("shp",)),
    ("atlassian_token", _tok("ATATT3", r"[A-Za-z0-9_=-]{100,}+"), ("atatt3",)),
    ("bitbucket_app_password", _tok("ATBB", r"[A-Za-z0-9_=.-]{32,}+"), ("atbb",)),
    ("databricks_token", _tok("dapi", r"[a-f0-9]{32}(?:-[0-9])?"), ("dapi",)),
    (
        "doppler_token",
        _tok("dp.", r"(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}+", "A-Za-z0-9_.-"),
        ("dp.",),
    ),
    ("pulumi_token", _tok("pul-", r"[a-f0-9]{40}"), ("pul-",)),
    ("terraform_token", _bounded(r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}+"), ("atlasv1",)),
    ("vault_token", _tok("hv", r"[sb]\.[A-Za-z0-9_-]{24,}+", "A-Za-z0-9_.-"), ("hvs.", "hvb.")),
    ("linear_api_key", _tok("lin_api_", r"[A-Za-z0-9]{40}"), ("lin_api_",)),
    ("notion_token", _tok("ntn_", r"[A-Za-z0-9]{40,}+"), ("ntn_",)),
    ("postman_api_key", _tok("PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}"), ("pmak-",)),
    ("telegram_bot_token", _bounded(r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}", "A-Za-z0-9_-"), (":aa",)),
    ("square_token", _tok("sq0", r"(?:atp|csp|idp)-[A-Za-z0-9_-]{22,}+"), ("sq0",)),
    ("grafana_cloud_token", _tok("glc_", r"[A-Za-z0-9+/]{32,}+={0,2}"), ("glc_",)),
    ("grafana_service_token", _tok("glsa_", r"[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"), ("glsa_",)),
    ("sentry_token", _tok("sntry", r"[su]_[A-Za-z0-9+/=_]{40,}+"), ("sntry",)),
    ("newrelic_key", _tok("NR", r"(?:AK|II|AA)-[A-Z0-9]{27}"), ("nrak-", "nrii-", "nraa-")),
    ("alibaba_access_key", _bounded(r"LTAI[A-Za-z0-9]{12,20}"), ("ltai",)),
    ("dockerhub_token", _tok("dckr_pat_", r"[A-Za-z0-9_-]{27,}+"), ("dckr_pat_",)),
    ("replicate_token", _tok("r8_", r"[A-Za-z0-9]{37,}+"), ("r8_",)),
    ("groq_key", _tok("gsk_", r"[A-Za-z0-9]{48,}+"), ("gsk_",)),
    ("xai_key", _tok("xai-", r"[A-Za-z0-9]{70,}+"), ("xai-",)),
    ("perplexity_key", _tok("pplx-", r"[A-Za-z0-9]{40,}+"), ("pplx-",)),
    ("langsmith_key", _tok("lsv2_", r"(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"), ("lsv2_",)),
    ("supabase_token", _tok("sbp_", r"[a-f0-9]{40}"), ("sbp_",)),
    ("jfrog_token", _tok("AKCp", r"[A-Za-z0-9]{60,}+"), ("akcp",)),
    ("figma_token", _tok("figd_", r"[A-Za-z0-9_-]{40,}+"), ("figd_",)),
    ("planetscale_token", _tok("pscale_", r"(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}+"), ("pscale_",)),
    ("heroku_key", _tok("HRKU-", r"[A-Za-z0-9_-]{50,}+"), ("hrku-",)),
    ("facebook_token", _tok("EAA", r"[A-Z][A-Za-z0-9]{80,}+"), ("eaa",)),
    ("onepassword_token", _tok("ops_", r"eyJ[A-Za-z0-9+/_-]{40,}+={0,2}"), ("ops_eyj",)),
    (
        "tailscale_key",
        _tok("tskey-", r"(?:(?:auth|api|client|webhook|scim)-)?[A-Za-z0-9]{4,}+-[A-Za-z0-9]{16,}+"),
        ("tskey-",),
    ),
    ("fcm_server_key", _tok("AAAA", r"[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,}+"), (":apa91b",)),
    (
        "flyio_token",
        _tok("fm", r"(?:1[ar]|2)_[A-Za-z0-9+/=_-]{40,}+(?:,fm(?:1[ar]|2)_[A-Za-z0-9+/=_-]{20,}+)*+"),
        ("fm1a_", "fm1r_", "fm2_"),
    ),
    ("okta_token", r"SSWS(?<![A-Za-z0-9]SSWS)[ \t]++" + _V + r"(?P<s>[A-Za-z0-9_-]{20,}+)", ("ssws",)),
    ("jwt", _tok("eyJ", r"[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+"), ("eyj",)),
    ("docker_config_auth", r'"auth"[ \t]*+:[ \t]*+"(?P<s>[A-Za-z0-9+/]{8,}+={0,2})"', ('"auth"',)),
    (
        "kubeconfig_key_data",
        r"(?i)client-key-data[\"']?[ \t]*+:[ \t]*+[\"']?(?P<s>[A-Za-z0-9+/]{16,}+={0,2})",
        ("client-key-data",),
    ),
    (
        "url_query_secret",
        r"(?i)[?&](?:key|api[_-]?key|apikey|access[_-]?token|token|auth|password|secret|client[_-]?secret)="
        + _V
        + r"(?P<s>[^&\s#\"'<>]{8,}+)",
        ("key=", "token=", "auth=", "password=", "secret="),
    ),
    ("sentry_dsn", r"://(?P<s>[0-9a-f]{32})(?=[:@])", ("://",)),
    ("url_credentials", r"://[^\s:@/\"'<>\[\]]{0,256}+:" + _V + r"(?P<s>[^\s/\"'<>]{1,256})@", ("://",)),
    (
        "netrc_password",
        r"(?i)\bmachine[ \t\n]++\S{1,256}+[ \t\n]++login[ \t\n]++\S{1,256}+[ \t\n]++password[ \t\n]++"
        + _V
        + r"(?P<s>\S{1,256}+)",
        ("machine",),
    ),
    (
        "pgpass_password",
        r"(?m)^[A-Za-z0-9.*_\[\]-]{1,253}+:(?:[0-9]{1,5}|\*):(?:\*|[A-Za-z_][^\s:]{0,127}+)"
        r":(?:\*|[A-Za-z_][A-Za-z0-9_.@-]{0,127}+):" + _V + r"(?P<s>(?:[^\s:\\]|\\.){1,256}+)\r?$",
        (":",),
    ),
    (
        "authorization_header",
        r"(?i)(?<![A-Za-z0-9-])(?:proxy-)?authorization[\"']?[ \t]*+[:=][ \t]*+[\"']?"
        r"(?:(?:bearer|basic|token|digest|bot|apikey|sso-key|negotiate)[ \t]++)?(?P<s>[A-Za-z0-9._~+/=:-]{8,}+)",
        ("authorization",),
    ),
    (
        "api_key_header",
        r"(?i)(?<![A-Za-z0-9-])(?:x-api-key|api-key|x-goog-api-key|x-auth-token|private-token|x-access-token"
        r"|ocp-apim-subscription-key|x-functions-key)[\"']?[ \t]*+[:=][ \t]*+[\"']?"
        r"(?P<s>[A-Za-z0-9._~+/=-]{8,}+)",
        ("api-key", "auth-token", "private-token", "access-token", "subscription-key", "functions-key"),
    ),
    ("bearer_token", r"(?i)(?<![A-Za-z0-9])bearer[ \t]++(?P<s>[A-Za-z0-9._~+/-]{16,}+=*+)", ("bearer",)),
    (
        "cookie_header",
        r"(?im)^[ \t<>]*+(?:set-)?cookie:[ \t]*+" + _V + r"(?P<s>[^\r\n]{1,4096}+)",
        ("cookie:",),
    ),
    (
        "curl_user_password",
        _cmd(("curl",), r"(?:-[uU][ \t]*+|--(?:proxy-)?user(?:=|[ \t]++))[\"']?[^\s:\"']{0,256}+:" + _ARG),
        ("curl",),
    ),
    ("mysql_password", _cmd(("mysql", "mariadb"), "-p" + _ARG, suffix="-?[a-z]{0,8}+"), ("mysql", "mariadb")),
    ("sshpass_password", _cmd(("sshpass",), r"-p[ \t]*+" + _ARG, r"-[A-Za-z]++"), ("sshpass",)),
    (
        "docker_login_password",
        _cmd(
            ("docker", "podman", "nerdctl", "buildah", "skopeo", "finch", "oras", "helm"),
            r"(?:-p|--password)(?:=|[ \t]++)" + _ARG,
            suffix=r"(?:[ \t]++registry)?[ \t]++login",
        ),
        ("login",),
    ),
    (
        "redis_cli_password",
        _cmd(("redis-cli", "valkey-cli", "keydb-cli"), r"(?:-a|--pass)(?:=|[ \t]++)" + _ARG),
        ("redis-cli", "valkey-cli", "keydb-cli"),
    ),
    (
        "cli_secret_flag",
        r"(?i)(?<![A-Za-z0-9-])--(?:password|passwd|token|api-key|secret|client-secret)(?:=|[ \t]++)"
        + _V
        + r"(?!via[ \t])(?P<s>(?!-)[^\s\"']{3,512}+)",
        ("--pass", "--token", "--api-key", "--secret", "--client-secret"),
    ),
    (
        "php_define_secret",
        r"(?:define(?<![A-Za-z0-9_$>]define)|DEFINE(?<![A-Za-z0-9_$>]DEFINE))\([ \t]*+[\"'](?=[A-Z0-9_]{0,64}?(?:"
        + _SECRET_WORDS
        + r"|SALT))"
        r"[A-Z][A-Z0-9_]{0,127}+[\"'][ \t]*+,[ \t]*+(?:'"
        + _V
        + r"(?P<s1>[^'\n]{1,512})'|\""
        + _V
        + r"(?P<s2>[^\"\n]{1,512})\")",
        ("define(",),
    ),
    (
        "xml_secret",
        r"(?i)<(?P<t>[A-Za-z0-9_:.-]{0,64}?(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key"
        r"|secret[_-]?key|private[_-]?key|credentials?))(?:[ \t][^<>\n]{0,256}+)?>"
        + _V
        + r"(?![$/~])(?P<s>[^<\n]{1,1024}+)</(?P=t)>",
        ("password>", "passwd>", "passphrase>", "secret>", "token>", "key>", "credential>", "credentials>"),
    ),
    (
        "xml_secret",
        r"(?i)<add[ \t]++key=[\"'][A-Za-z0-9_.:-]{0,64}?(?:password|pwd|secret|token|api[_-]?key)[\"'][ \t]++"
        r"value=[\"']" + _V + r"(?![$])(?P<s>[^\"'\n]{1,1024})[\"']",
        ("<add",),
    ),
    (
        "env_secret",
        rf"(?m)^[ \t]*+(?:export[ \t]++)?{_ENV_KEY}(?:={_V}(?P<s>\S{{1,4096}}+)|[ \t]*+=[ \t]*+{_VALUE})",
        ("=",),
    ),
    ("env_secret", rf"[\"']{_ENV_KEY}={_V}(?P<s>[^\"'\n]{{1,4096}}+)[\"']", ("=",)),
    (
        "password_assignment",
        rf"(?i)(?<![A-Za-z0-9])(?:password|passwd|passphrase|db_pass|user_pass){_SEP}{_VALUE}",
        ("passw", "passphrase", "_pass"),
    ),
    (
        "password_assignment",
        r"(?m)^[ \t]*+(?:-[ \t]++)?(?:[\"']?[A-Za-z0-9_.-]{0,64}?(?i:password|passwd|passphrase|pwd|_pass)[\"']?"
        r"[ \t]*+:[ \t]++|[A-Z0-9_]{0,64}?(?:PASSWORD|PASSWD|PASSPHRASE|_PWD|_PASS)=)(?!"
        + _PLAIN_NOT
        + r"[ \t]*+(?:#|\r?$))"
        + _V
        + r"(?![A-Za-z][a-z_-]*+[A-Z])(?P<s>[A-Za-z][A-Za-z_-]{1,127}+)[ \t]*+(?:#[^\n]*+)?\r?$",
        ("passw", "passphrase", "pwd", "_pass"),
    ),
    (
        "secret_assignment",
        r"(?i)(?<![A-Za-z0-9])(?:api[_-]?key|apikey|api[_-]?token|access[_-]?key|access[_-]?token|auth[_-]?token"
        r"|secret[_-]?key"
        r"|client[_-]?secret|app[_-]?secret|private[_-]?token|refresh[_-]?token|bearer[_-]?token|secret"
        r"|token(?<!(?:eos|bos|pad|unk|sep|cls)_token)(?<!mask_token))"
        rf"{_SEP}{_VALUE}",
        ("key", "token", "secret"),
    ),
    (
        "generic_secret",
        "(?P<k>"
        + _GENERIC_KEY
        + ")"
        + _SEP
        + rf"""(?:"(?P<s1>{_GENERIC_VALUE})"|'(?P<s2>{_GENERIC_VALUE})'|(?P<s3>{_GENERIC_VALUE})(?![^\s,;)}}\]"'`]))""",
        ("secret", "token", "passw", "pwd", "passphrase", "key", "credential", "auth"),
    ),
)

CHECKS: dict[str, Callable[[re.Match[str], str], bool]] = {"generic_secret": looks_random}
"""Kinds whose match must also pass a test of (match, secret); a match that fails is left as it is."""
INNER: dict[str, str] = {
    "kubernetes_secret": r"(?m)^[ \t]++[^\s:]{1,253}+:[ \t]++(?!\[REDACTED:)(?P<v>[^\s#|>&*!][^\r\n]*+)"
}
"""Kinds whose secret group is a block: each match of this regex in it has its group ``v`` replaced."""

ALT_KINDS = {"url_credentials": ("database_url", DB_SCHEME_RE)}
"""Rules whose kind depends on the text just before the match (looked at within 40 chars)."""

KINDS: tuple[str, ...] = tuple(
    dict.fromkeys(k for kind, _, _ in RULES for k in (kind, *ALT_KINDS.get(kind, ("",))[:1]) if k)
)
"""Every built-in credential kind, in the order the rules run."""
