"""Planted credentials: one or more realistic samples of every built-in redaction kind.

Every value is fake but has the real format (prefix, alphabet, length), generated from a seeded RNG so
the samples are the same on every run. ``SAMPLES`` rows are (kind, text as a tool would print it,
secret value that must never reach disk).
"""

from __future__ import annotations

import base64
import random
import string

_RNG = random.Random(20240610)
AN = string.ascii_letters + string.digits
UP = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = AN + "+/"
W = AN + "_-"


def fake(alphabet: str, n: int) -> str:
    """``n`` characters of ``alphabet`` (the next ones of the seeded sequence), with a digit in them."""
    out = "".join(_RNG.choice(alphabet) for _ in range(n))
    if not any(c.isdigit() for c in out) and any(c.isdigit() for c in alphabet):
        out = out[:-1] + "7"
    return out


def _pem(label: str) -> tuple[str, str]:
    body = "\n".join(fake(B64, 64) for _ in range(6))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n", body.split("\n")[2]


def _jwt() -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    body = base64.urlsafe_b64encode(('{"sub":"' + fake(AN, 24) + '"}').encode()).decode().rstrip("=")
    return f"{head}.{body}.{fake(W, 43)}"


def _rows() -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []

    def add(kind: str, template: str, secret: str) -> None:
        rows.append((kind, template.replace("{s}", secret), secret))

    for label in (
        "RSA PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "EC PRIVATE KEY",
        "PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ):
        text, line = _pem(label)
        add("private_key", "$ cat key.pem\n" + text + "$ ", line)
    sa_line = fake(B64, 64)
    add(
        "private_key",
        '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n{s}\\n'
        + fake(B64, 40)
        + '==\\n-----END PRIVATE KEY-----\\n", "client_email": "x@p.iam.gserviceaccount.com"}',
        sa_line,
    )
    add("private_key", "-----BEGIN RSA PRIVATE KEY-----\n{s}\n[output truncated]", fake(B64, 64))
    add(
        "putty_private_key",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 1\n" + fake(B64, 60)
        + "\nPrivate-Lines: 1\n{s}\nPrivate-MAC: " + fake(HEX, 64),
        fake(B64, 48),
    )  # fmt: skip
    add("age_secret_key", "# public key: age1abc\n{s}\n", "AGE-SECRET-KEY-1" + fake(UP, 58))
    add("aws_access_key_id", "[default]\naws_access_key_id = {s}\n", "AKIA" + fake(UP, 16))
    add("aws_access_key_id", '"AccessKeyId": "{s}",', "ASIA" + fake(UP, 16))
    add("aws_secret_access_key", "aws_secret_access_key = {s}\n", fake(B64, 40))
    add("aws_secret_access_key", '"SecretAccessKey": "{s}",', fake(B64, 40))
    add("aws_session_token", '"SessionToken": "{s}",', fake(B64, 300))
    add(
        "gcp_api_key",
        "GET https://maps.googleapis.com/maps/api/geocode/json?address=x&key={s}",
        "AIza" + fake(W, 35),
    )
    add("gcp_private_key_id", '"private_key_id": "{s}",', fake(HEX, 40))
    add("gcp_oauth_client_secret", '{"installed": {"client_secret": "{s}"}}', "GOCSPX-" + fake(W, 28))
    add("google_oauth_token", "token acquired: {s} (expires in 3599s)", "ya29." + fake(W, 120))
    add("google_refresh_token", '"refresh_token": "{s}",', "1//0g" + fake(W, 98))
    add(
        "azure_storage_key",
        "DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey={s};EndpointSuffix=core.windows.net",
        fake(B64, 86) + "==",
    )
    add(
        "azure_shared_access_key",
        "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={s}",
        fake(B64, 43) + "=",
    )
    add(
        "azure_sas_signature",
        "https://acct1.blob.core.windows.net/c/b.txt?sv=2022-11-02&se=2030-01-01&sr=b&sp=r&sig={s}",
        fake(AN, 40) + "%3D",
    )
    add("azure_client_secret", "Client secret value (copy now): {s}", "Xy7" + "8Q~" + fake(AN + "_~.-", 34))
    add(
        "lightmem2_gateway_token",
        "export ANTHROPIC_CUSTOM_HEADERS='x-lightmem2-token: {s}'",
        "lm2_" + fake(W, 43),
    )
    for kind, prefix in (
        ("github_pat", "ghp_"),
        ("github_oauth_token", "gho_"),
        ("github_user_token", "ghu_"),
        ("github_server_token", "ghs_"),
        ("github_refresh_token", "ghr_"),
    ):
        add(kind, "remote: using token {s}\n", prefix + fake(AN, 36))
    add("github_fine_grained_pat", "GH auth: {s}", "github_pat_" + fake(AN, 22) + "_" + fake(AN, 59))
    for kind, prefix in (
        ("gitlab_pat", "glpat-"),
        ("gitlab_pipeline_token", "glptt-"),
        ("gitlab_runner_token", "glrt-"),
        ("gitlab_deploy_token", "gldt-"),
        ("gitlab_feed_token", "glft-"),
        ("gitlab_oauth_secret", "gloas-"),
        ("gitlab_runner_registration", "GR1348941"),
    ):
        add(kind, "gitlab: {s} registered\n", prefix + fake(W, 20))
    add("slack_config_token", "config token {s}", "xoxe.xoxp-1-" + fake(AN, 140))
    add("slack_bot_token", "SLACK bot {s}", "xoxb-1234567890-1234567890123-" + fake(AN, 24))
    add("slack_user_token", "slack user {s}", "xoxp-1234567890-1234567890123-" + fake(AN, 32))
    add("slack_token", "legacy {s}", "xoxa-2-" + fake(AN, 40))
    add("slack_app_token", "app-level {s}", "xapp-1-A0123456789-1234567890123-" + fake(HEX, 64))
    add("slack_webhook", "POST https://hooks.slack.com/services/{s}", "T0123ABCD/B0123ABCD/" + fake(AN, 24))
    add("discord_webhook", "https://discord.com/api/webhooks/123456789012345678/{s}", fake(W, 68))
    add("anthropic_admin_key", "admin: {s}", "sk-ant-admin01-" + fake(W, 93) + "AA")
    add("anthropic_key", "ANTHROPIC key is {s}\n", "sk-ant-api03-" + fake(W, 93) + "AA")
    add("openrouter_key", "router {s}", "sk-or-v1-" + fake(HEX, 64))
    add("openai_admin_key", "org admin {s}", "sk-admin-" + fake(W, 64))
    add("openai_key", "client = OpenAI(api_key={s})", "sk-proj-" + fake(W, 156))
    add("openai_key", "key: {s}", "sk-" + fake(AN, 20) + "T3BlbkFJ" + fake(AN, 20))
    add("mapbox_secret_token", "mapbox {s}", "sk.eyJ" + fake(W, 60) + "." + fake(W, 22))
    add("stripe_secret_key", "Stripe.api_key = {s}", "sk_live_" + fake(AN, 99))
    add("stripe_restricted_key", "restricted {s}", "rk_live_" + fake(AN, 99))
    add("stripe_webhook_secret", "signing secret {s}", "whsec_" + fake(AN, 32))
    add("twilio_api_key", "Twilio API key SID {s}", "SK" + fake(HEX, 32))
    add("twilio_auth_token", 'twilio_auth_token: "{s}"', fake(HEX, 32))
    add("sendgrid_key", "sg {s}", "SG." + fake(W, 22) + "." + fake(W, 43))
    add("mailgun_key", "mailgun {s}", "key-" + fake(HEX, 32))
    add("mailchimp_key", "mailchimp {s}", fake(HEX, 32) + "-us14")
    add("npm_token", "npm token {s}", "npm_" + fake(AN, 36))
    add(
        "npmrc_auth",
        "//registry.npmjs.org/:_authToken={s}\n",
        fake(HEX, 8) + "-" + fake(HEX, 4) + "-4" + fake(HEX, 20),
    )
    add("pypi_token", "password = {s}", "pypi-AgEIcHlwaS5vcmc" + fake(W, 70))
    add("huggingface_token", "HF {s}", "hf_" + fake(AN, 34))
    add("digitalocean_token", "doctl {s}", "dop_v1_" + fake(HEX, 64))
    add("shopify_token", "shop {s}", "shpat_" + fake(HEX, 32))
    add("atlassian_token", "jira {s}", "ATATT3xFfGF0" + fake(W, 180) + "=ABCD1234")
    add("bitbucket_app_password", "bb {s}", "ATBB" + fake(AN, 32))
    add("databricks_token", "dbx {s}", "dapi" + fake(HEX, 32))
    add("doppler_token", "doppler {s}", "dp.pt." + fake(AN, 43))
    add("pulumi_token", "pulumi {s}", "pul-" + fake(HEX, 40))
    add("terraform_token", "tfc {s}", fake(AN, 14) + ".atlasv1." + fake(W, 67))
    add("vault_token", "VAULT {s}", "hvs." + fake(W, 90))
    add("linear_api_key", "linear {s}", "lin_api_" + fake(AN, 40))
    add("notion_token", "notion {s}", "ntn_" + fake(AN, 46))
    add("postman_api_key", "postman {s}", "PMAK-" + fake(HEX, 24) + "-" + fake(HEX, 34))
    add("telegram_bot_token", "bot {s} started", "1234567890:AA" + fake(W, 33))
    add("square_token", "square {s}", "sq0atp-" + fake(W, 22))
    add("grafana_cloud_token", "grafana {s}", "glc_" + fake(AN, 64) + "==")
    add("grafana_service_token", "grafana sa {s}", "glsa_" + fake(AN, 32) + "_" + fake(HEX, 8))
    add("sentry_token", "sentry {s}", "sntrys_eyJ" + fake(AN, 80) + "_" + fake(AN, 43))
    add("newrelic_key", "newrelic {s}", "NRAK-" + fake(UP, 27))
    add("alibaba_access_key", "aliyun {s}", "LTAI" + fake(AN, 20))
    add("dockerhub_token", "docker login -u me -p {s}", "dckr_pat_" + fake(W, 27))
    add("replicate_token", "replicate {s}", "r8_" + fake(AN, 37))
    add("groq_key", "groq {s}", "gsk_" + fake(AN, 52))
    add("xai_key", "grok {s}", "xai-" + fake(AN, 80))
    add("perplexity_key", "pplx {s}", "pplx-" + fake(AN, 48))
    add("langsmith_key", "langsmith {s}", "lsv2_pt_" + fake(HEX, 32) + "_" + fake(HEX, 10))
    add("supabase_token", "supabase {s}", "sbp_" + fake(HEX, 40))
    add("jfrog_token", "jfrog {s}", "AKCp" + fake(AN, 69))
    add("figma_token", "figma {s}", "figd_" + fake(W, 40))
    add("planetscale_token", "pscale {s}", "pscale_tkn_" + fake(W, 43))
    add("heroku_key", "heroku {s}", "HRKU-" + fake(W, 60))
    add("facebook_token", "fb {s}", "EAAG" + fake(AN, 150))
    add("jwt", "id_token: {s}", _jwt())
    add("docker_config_auth", '{"auths": {"ghcr.io": {"auth": "{s}"}}}', fake(B64, 40) + "==")
    add("kubeconfig_key_data", "users:\n- name: admin\n  user:\n    client-key-data: {s}\n", fake(B64, 200))
    add(
        "url_query_secret",
        "GET https://api.example.com/v1/export?format=csv&api_key={s}&page=2",
        fake(AN, 32),
    )
    add(
        "url_credentials",
        "Cloning into 'repo'... https://deploy:{s}@git.example.com/repo.git",
        fake(AN, 20) + "!",
    )
    add("database_url", "connecting to postgresql://app:{s}@db.internal:5432/prod", fake(AN, 18) + "$x")
    add("database_url", "MONGO=mongodb+srv://root:{s}@cluster0.example.net/test", fake(AN, 24))
    add("database_url", "redis://:{s}@localhost:6379/0", fake(AN, 24))
    add("netrc_password", "machine api.example.com login bob password {s}\n", fake(AN, 16) + "#")
    add("authorization_header", "> Authorization: Basic {s}\n", fake(B64, 40) + "=")
    add("authorization_header", "curl -H 'Authorization: Bearer {s}' https://api.example.com", fake(W, 40))
    add("api_key_header", "> x-api-key: {s}\n", fake(AN, 40))
    add("api_key_header", "headers = {'api-key': '{s}'}", fake(AN, 32))
    add("bearer_token", "using bearer {s} for the retry", fake(W, 40))
    add("cookie_header", "< Set-Cookie: session={s}; Path=/; HttpOnly\n", fake(AN, 40))
    add("cli_secret_flag", "$ mytool login --token {s} --verbose", fake(AN, 30))
    add("cli_secret_flag", "$ psql --password={s} -h db", fake(AN, 12) + "!x")
    add("env_secret", "$ cat .env\nDEBUG=1\nexport MY_SERVICE_SECRET={s}\nPORT=8080\n", fake(AN, 24))
    add("env_secret", "$ printenv\nHOME=/root\nDB_PASSWORD={s}\nPATH=/usr/bin\n", fake(AN, 20))
    add("env_secret", '"Env": ["PATH=/usr/bin", "STRIPE_API_KEY={s}"],', fake(AN, 30))
    add("env_secret", "SECRET_KEY = '{s}'\n", "django-insecure-" + fake(AN, 40))
    add("password_assignment", 'DATABASES = {"default": {"PASSWORD": "{s}"}}', fake(AN, 16))
    add("password_assignment", "db:\n  user: app\n  password: {s}\n", fake(AN, 14) + "&3")
    add("password_assignment", "conn = connect(user='a', password='{s}')", fake(AN, 16))
    add("secret_assignment", '{"api_key": "{s}", "model": "gpt"}', fake(AN, 32))
    add("secret_assignment", 'client_secret = "{s}"', fake(AN, 32))
    add("secret_assignment", "token: {s}\n", fake(AN, 40))
    # Issue #19: formats that had no rule. Appended here so the samples above keep their values.
    add(
        "okta_token",
        "curl -H 'Authorization: SSWS {s}' https://dev-123456.okta.com/api/v1/users",
        "00" + fake(W, 40),
    )
    add(
        "tailscale_key",
        "$ sudo tailscale up --authkey={s}\n",
        "tskey-auth-k" + fake(AN, 10) + "CNTRL-" + fake(AN, 33),
    )
    add("tailscale_key", "API access token: {s}\n", "tskey-api-k" + fake(AN, 10) + "CNTRL-" + fake(AN, 33))
    add(
        "tailscale_key",
        "OAuth client secret: {s}\n",
        "tskey-client-k" + fake(AN, 10) + "CNTRL-" + fake(AN, 33),
    )
    add("curl_user_password", "$ curl -s -u deploy:{s} https://ci.example.com/api/json\n", fake(AN, 16) + "!")
    add(
        "mysql_password",
        "$ mysql -h db.internal -u root -p{s} app_production -e 'SELECT COUNT(*) FROM users'\n",
        fake(AN, 14),
    )
    add("cli_secret_flag", "$ mysqldump --user=app --password={s} app > dump.sql\n", fake(AN, 14))
    add(
        "sshpass_password",
        "$ sshpass -p '{s}' ssh -o StrictHostKeyChecking=no -p 2222 root@10.0.0.12 uptime\n",
        fake(AN, 12) + "#",
    )
    add(
        "docker_login_password",
        "$ docker login -u ci-bot -p {s} registry.example.com\nWARNING! Using --password via the CLI is insecure."
        " Use --password-stdin.\nLogin Succeeded\n",
        fake(AN, 20),
    )  # fmt: skip
    add("docker_login_password", "$ podman login --username ci --password {s} quay.io\n", fake(AN, 20))
    add(
        "redis_cli_password",
        "$ redis-cli -h cache.internal -p 6379 -a {s} PING\nWarning: Using a password with '-a' or '-u' option"
        " on the command line interface may not be safe.\nPONG\n",
        fake(AN, 24),
    )  # fmt: skip
    add("pgpass_password", "$ cat ~/.pgpass\ndb.internal:5432:appdb:app_user:{s}\n$ ", fake(AN, 20))
    add(
        "wireguard_key",
        "$ sudo wg showconf wg0\n[Interface]\nListenPort = 51820\nPrivateKey = {s}\n\n[Peer]\nPublicKey = "
        + fake(B64, 43) + "=\nAllowedIPs = 10.0.0.2/32\nEndpoint = 203.0.113.5:51820\n",
        fake(B64, 43) + "=",
    )  # fmt: skip
    add(
        "wireguard_key",
        "[Peer]\nPublicKey = " + fake(B64, 43) + "=\nPresharedKey = {s}\n",
        fake(B64, 43) + "=",
    )
    vpn_lines = [fake(HEX, 32) for _ in range(16)]
    add(
        "openvpn_static_key",
        "$ cat ta.key\n#\n# 2048 bit OpenVPN static key\n#\n-----BEGIN OpenVPN Static key V1-----\n"
        + "\n".join(vpn_lines[:7]) + "\n{s}\n" + "\n".join(vpn_lines[8:]) + "\n-----END OpenVPN Static key V1-----\n",
        vpn_lines[7],
    )  # fmt: skip
    add(
        "hex_private_key",
        "Account #0: 0x"
        + fake(HEX, 40)
        + " (10000 ETH)\nPrivate Key: 0x{s}\n\nAccount #1: 0x"
        + fake(HEX, 40),
        fake(HEX, 64),
    )
    ops_claims = (
        '{"signInAddress":"my.1password.com","userAuth":{"method":"SRPg-4096","salt":"' + fake(W, 22) + '"},'
    )
    ops_claims += (
        '"email":"' + fake(HEX, 12) + '@1passwordserviceaccounts.com","srpX":"' + fake(HEX, 64) + '"}'
    )
    add(
        "onepassword_token",
        "export OP_SERVICE_ACCOUNT_TOKEN={s}\n",
        "ops_" + base64.b64encode(ops_claims.encode()).decode().rstrip("="),
    )
    add(
        "aws_credentials_csv",
        "$ cat ci-bot_accessKeys.csv\nAccess key ID,Secret access key\n{s}\n",
        "AKIA" + fake(UP, 16) + "," + fake(B64, 40),
    )
    add(
        "aws_credentials_csv",
        "User name,Password,Access key ID,Secret access key,Console login link\n{s}\n",
        "ci-bot,,AKIA"
        + fake(UP, 16)
        + ","
        + fake(B64, 40)
        + ",https://123456789012.signin.aws.amazon.com/console",
    )
    letters = string.ascii_lowercase
    add(
        "password_assignment",
        "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_USER: app\n"
        "      POSTGRES_PASSWORD: {s}\n    ports:\n      - 5432:5432\n",
        fake(letters, 10),
    )  # fmt: skip
    add(
        "password_assignment",
        "    environment:\n      - MYSQL_USER=app\n      - MYSQL_PASSWORD={s}\n",
        fake(letters, 9),
    )
    add(
        "password_assignment",
        "smtp:\n  host: mail.example.com\n  password: {s}\n  port: 587\n",
        fake(letters, 11),
    )
    add(
        "password_assignment",
        "'mysql' => [\n    'driver' => 'mysql',\n    'username' => 'forge',\n    'password' => '{s}',\n],",
        fake(AN, 16),
    )
    add("php_define_secret", "define( 'DB_USER', 'wp' );\ndefine( 'DB_PASSWORD', '{s}' );\n", fake(AN, 18))
    add("php_define_secret", "define('AUTH_KEY', '{s}');", fake(AN + "!@#%^&*()-_[]{}<>~+=,.;:/?|", 64))
    add("password_assignment", 'config = { username: "deploy", password: "{s}" }', fake(AN, 16))
    add(
        "password_assignment",
        'ActiveRecord::Base.establish_connection(:adapter => "mysql2", :password => "{s}")',
        fake(AN, 16),
    )
    add(
        "xml_secret",
        "<server>\n  <id>nexus</id>\n  <username>deployer</username>\n  <password>{s}</password>\n</server>",
        fake(AN, 16),
    )
    add(
        "xml_secret",
        '<appSettings>\n  <add key="StripeApiKey" value="{s}" />\n</appSettings>',
        "sk_" + fake(AN, 30),
    )
    add(
        "password_assignment",
        '<datasource jndi-name="java:/AppDS" user-name="app" password="{s}"/>',
        fake(AN, 16),
    )
    add(
        "sentry_dsn",
        'sentry_sdk.init(dsn="https://{s}@o450123.ingest.sentry.io/5512345", traces_sample_rate=1.0)',
        fake(HEX, 32),
    )
    add(
        "fcm_server_key",
        "curl -X POST -H 'Content-Type: application/json' -H 'Authorization: key={s}' https://fcm.googleapis.com/fcm/send",
        "AAAA" + fake(W, 7) + ":APA91b" + fake(W, 134),
    )  # fmt: skip
    add(
        "flyio_token",
        "$ fly tokens create deploy\nFlyV1 {s}\n",
        "fm2_" + fake(B64, 200) + "==,fm2_" + fake(B64, 120) + "=",
    )
    add("secret_assignment", '{"apiToken": "{s}", "baseUrl": "https://api.example.com"}', fake(AN, 32))
    add("secret_assignment", "integrations:\n  storage:\n    accessKey: {s}\n", fake(AN, 20))
    add(
        "kubernetes_secret",
        "$ kubectl get secret db-creds -o yaml\napiVersion: v1\ndata:\n  connection-string: {s}\nkind: Secret\n"
        "metadata:\n  name: db-creds\n  namespace: default\ntype: Opaque\n",
        base64.b64encode(fake(AN, 24).encode()).decode(),
    )  # fmt: skip
    add(
        "kubernetes_secret",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api\n  labels:\n    app: api\ntype: Opaque\ndata:\n"
        "  username: {s}\n---\napiVersion: v1\nkind: Service\n",
        base64.b64encode(b"svc-" + fake(AN, 6).encode()).decode(),
    )  # fmt: skip
    add("generic_secret", "notifications:\n  webhookSecret: {s}\n", fake(AN, 32))
    add("generic_secret", '{"issuer": "auth.example.com", "jwtSigningKey": "{s}"}', fake(B64, 43) + "=")
    add("generic_secret", "hmac-signing-key: {s}\n", fake(HEX, 64))
    add("generic_secret", "app.encryption.key={s}\n", fake(W, 32))
    add("generic_secret", "const client = new Client({ serviceCredential: '{s}' });", fake(AN, 40))
    return rows


SAMPLES: list[tuple[str, str, str]] = _rows()
"""(kind, text, secret) rows; the secret text occurs inside the text exactly once."""

NEGATIVES: list[str] = [
    "wrapt<1.14,>=1.11",
    "<class 'bytes'>",
    "password = get_password()",
    "password = config.db_password",
    "password = secret_value",
    "token = tokens[0]",
    "if password:\n    return token",
    "def login(user: str, password: str) -> Token:",
    "password: Optional[str] = None",
    "api_key: str = Field(..., description='the key')",
    "SECRET_KEY = os.environ['SECRET_KEY']",
    "PATH=/usr/local/bin:/usr/bin\nHOME=/root\nPWD=/work/main\nGIT_AUTHOR_NAME=Jane",
    "MAX_TOKENS=4096\nTOKENIZERS_PARALLELISM=false",
    "pip install scikit-learn==1.4.2 sk-video",
    "docker login --password-stdin < token.txt",
    "commit 3f1e2d4c5b6a79880716253443526170f9e8d7c6",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "TZ=Asia/Tokyo",
    "401 Unauthorized: missing credentials",
    "Bearer token required",
    "https://example.com/path?query=1",
    "ssh://git@github.com/org/repo.git",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "The secret: is to keep going",
    "taskmaster-scheduler-generator-module-v2",
    "[lightmem2: 12,000 chars archived as 0123456789abcdef0123456789abcdef]",
    "WARNING! Using --password via the CLI is insecure. Use --password-stdin.",
    'tokenizer.eos_token = "</s>"\npad_token: "<pad>"',
    'help="Specify a proxy in the form scheme://[user:passwd@]proxy.server:port."',
    # Near misses of the key-name + entropy rule and of the command-line and config-line rules.
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: Jane Doe <jane@example.com>\n"
    "Date:   Mon Jun 10 12:00:00 2024 +0000\n\n    Fix token refresh (closes #42)\n",
    "diff --git a/src/auth/token.py b/src/auth/token.py\nindex 3f1e2d4..9a8b7c6 100644\n"
    "--- a/src/auth/token.py\n+++ b/src/auth/token.py\n@@ -10,7 +10,7 @@ def refresh_token(session):\n",
    "tests/test_auth.py::test_refresh_token PASSED [ 50%]\ntests/test_auth.py::test_password_reset FAILED [100%]\n"
    "E   AssertionError: assert 'expired' == 'valid'\n==== 1 failed, 1 passed in 0.12s ====",
    "def connect(cfg):\n    password = get_password()\n    token = cfg.api_token\n    secret_key = settings.SECRET_KEY\n"
    "    conn = Client(\n        user=user,\n        password=password\n    )\n",
    "@dataclass\nclass Login:\n    username: str\n    password: str\n    passphrase: Optional[str] = None\n",
    "interface Credentials {\n  password: string\n  apiToken?: string\n}",
    "auth:\n  token_ttl: 3600\n  password_min_length: 12\n  secret_name: app-secrets\n  key_file: /etc/ssl/private/server.key\n",
    "2024-06-10T12:00:00Z INFO request 123e4567-e89b-12d3-a456-426614174000 token refreshed for user 42 in 12ms",
    "token_path: /var/run/secrets/kubernetes.io/serviceaccount/token\nssh_key: ~/.ssh/id_ed25519\n"
    "credentials_file: ./config/credentials.json\nsigning_key: keys/release-2024.pem",
    "cache-key: Linux-pip-3f1e2d4c5b6a79880716253443526170f9e8d7c6",
    "PublicKey = xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=",
    '{"nextPageToken": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA3enhqOGRjZXMQABoA", "kind": "storage#objects"}',
    "routing_key: orders.created.v2.eu-west-1.region3",
    "apiKey: process.env.STRIPE_KEY_V2\nauthToken: this.session.authTokenV2",
    "const valid = tokens.filter(token => !token.expired);",
    "$ mysql -u root -p -e 'SHOW DATABASES'\n$ sshpass -f ~/.pw ssh -p 2222 root@host\n$ docker run -u 1000:1000 -p 8080:80 nginx",
    "$ curl -u $API_USER:$API_TOKEN https://api.example.com/v1/me",
    "root:x:0:0:root:/root:/bin/bash\n00:1a:2b:3c:4d:5e\nsrc/app.c:12:5: error: expected ';'\nlib:3:4:5:6",
    "apiVersion: v1\nkind: ConfigMap\ndata:\n  LOG_LEVEL: debug\n",
    "<key>CFBundleIdentifier</key>\n<string>com.example.app</string>\n<PasswordRequired>false</PasswordRequired>",
    "def sign(private_key: Ed25519PrivateKey | Ed448PrivateKey, data: bytes) -> bytes:\n"
    "    signer_key: PKCS7PrivateKeyTypes,\n    passwd: HTTPPasswordMgr\n",
]
"""Ordinary tool output that must come out of redaction unchanged."""


def all_secrets_text() -> str:
    """Every sample, one after the other, as one long tool output."""
    return "\n".join(text for _kind, text, _secret in SAMPLES) + "\n"
