// The Python side as seen from OpenClaw: find or start `lightmem2 serve` on loopback, call its
// /sidecar routes with a time limit, and stop it with the host.
//
// Why so careful about failure: we sit on OpenClaw's hot path. Every call is bounded in time; when
// the sidecar is down or slow, callers get an error they turn into "leave the payload as it was"
// (fail-open), and a failed start is not retried for a while, so a broken install costs one short
// wait, not one per hook. `lastError` keeps the reason for `/lightmem2 doctor`.
//
// Why a secret: loopback is shared with every local user, so `lightmem2 serve` answers /sidecar calls
// only with the per-install secret in X-Lightmem2-Secret. We ask the CLI where it lives
// (`lightmem2 config sidecar`, which creates it if needed, and names server.port too) instead of re-deriving the data dir
// here: LIGHTMEM2_HOME and each platform's directory rules live in one place (Python), the answer is
// the same whether we spawn serve or find it running, and it follows the env we pass to serve. Before
// sending the secret (or any message) to whatever listens on the port, we check the server proves it
// knows the secret: an HMAC of a fresh challenge, so a process squatting the port learns nothing.

import { execFile, spawn } from "node:child_process";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";

const STDERR_TAIL = 4000;
export const SECRET_HEADER = "x-lightmem2-secret";
export const CHALLENGE_HEADER = "x-lightmem2-challenge";
const DEFAULT_PORT = 8787; // lightmem2's server.port default, until `config sidecar` has answered
const SECRET_RE = /^[0-9a-f]{64}$/;

/** What our serve answers to a health challenge (hex HMAC-SHA256 of the challenge under the secret). */
export function proofOf(secret, challenge) {
  return createHmac("sha256", secret).update(challenge).digest("hex");
}

function sameText(a, b) {
  const x = Buffer.from(String(a));
  const y = Buffer.from(String(b));
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Host-side settings with their defaults (the `openclaw` section of the plugin config). */
export function hostSettings(pluginConfig) {
  const own = (pluginConfig && typeof pluginConfig.openclaw === "object" && pluginConfig.openclaw) || {};
  return {
    command: typeof own.command === "string" && own.command ? own.command : "lightmem2",
    // null: lightmem2's own server.port, read with the secret (`lightmem2 config sidecar`); a port set
    // in openclaw.json (openclaw.port, which has no schema default for that reason) wins
    port: Number.isInteger(own.port) ? own.port : null,
    autoStart: own.autoStart !== false,
    startTimeoutMs: Number.isFinite(own.startTimeoutMs) ? own.startTimeoutMs : 15000,
    requestTimeoutMs: Number.isFinite(own.requestTimeoutMs) ? own.requestTimeoutMs : 10000,
    retryAfterMs: Number.isFinite(own.retryAfterMs) ? own.retryAfterMs : 30000,
    // lightmem2's own keys written in openclaw.json: set in lightmem2's config file at start, so they
    // take effect for serve, the CLI and doctor alike (the manifest schema has no defaults to fill in)
    lightmem2Keys: lightmem2Keys(pluginConfig),
  };
}

function lightmem2Keys(pluginConfig) {
  if (!pluginConfig || typeof pluginConfig !== "object") return null;
  const { openclaw: _own, ...keys } = pluginConfig;
  return Object.keys(keys).length ? keys : null;
}

export class Sidecar {
  constructor(settings, logger) {
    this.settings = settings;
    this.logger = logger;
    this.child = null;
    this.ready = false;
    this.starting = null;
    this.downUntil = 0;
    this.lastError = null;
    this.health = null;
    this.stderr = "";
    this.secret = null;
    this.mergeError = null;
    this.configError = null;
    this.configuredPort = null;
  }

  /** Where serve listens: the port given in openclaw.json, else lightmem2's server.port (once read). */
  get base() {
    return `http://127.0.0.1:${this.port}`;
  }

  get port() {
    return this.settings.port ?? this.configuredPort ?? DEFAULT_PORT;
  }

  /**
   * The per-install secret, from the file `lightmem2 config sidecar` names (with lightmem2's
   * server.port, used when openclaw.json sets no port); throws with the reason.
   */
  async loadSecret(force = false) {
    if (this.secret && !force) return this.secret;
    const { command, lightmem2Keys: keys } = this.settings;
    const argv = ["config", "sidecar", ...(keys ? ["--merge", JSON.stringify(keys)] : [])];
    const answer = await new Promise((resolve, reject) => {
      execFile(command, argv, { timeout: 15000, env: process.env }, (err, stdout, stderr) => {
        if (err) {
          const why = String(stderr || "").trim().split("\n").pop() || err.code || err.message;
          reject(new Error(`cannot run ${command} config sidecar (${why})`));
        } else resolve(String(stdout).trim());
      });
    });
    let path;
    try {
      const found = JSON.parse(answer);
      path = String(found.secretPath);
      if (Number.isInteger(found.port)) this.configuredPort = found.port;
      this.mergeError = found.mergeError || null;
      if (this.mergeError) this.logger?.warn?.(`lightmem2: openclaw.json keys not applied: ${this.mergeError}`);
      // an invalid config.json: the port above is that of the config in force (the last good one)
      const rejected = found.configError || null;
      if (rejected && rejected !== this.configError) this.logger?.warn?.(`lightmem2: config file rejected: ${rejected}`);
      this.configError = rejected;
    } catch {
      throw new Error(`${command} config sidecar printed ${JSON.stringify(answer.slice(0, 80))}, not JSON; is it lightmem2?`);
    }
    let value;
    try {
      value = (await readFile(path, "utf8")).trim();
    } catch (err) {
      throw new Error(`cannot read the sidecar secret ${path} (${err.code || err.message})`);
    }
    if (!SECRET_RE.test(value)) throw new Error(`${path} does not hold a lightmem2 secret; delete it and restart serve`);
    this.secret = value;
    return value;
  }

  /** True when the sidecar answers (started by us if needed); never throws. */
  async ensure() {
    if (this.ready) return true;
    if (Date.now() < this.downUntil) return false;
    if (!this.starting) {
      this.starting = this._start().finally(() => {
        this.starting = null;
      });
    }
    return this.starting;
  }

  /** Is our serve listening? Checks its proof of the secret before anything is sent to it. */
  async _probe(timeoutMs = 1000) {
    const url = `${this.base}/sidecar/health`;
    try {
      const challenge = randomBytes(16).toString("hex");
      const res = await fetch(url, { headers: { [CHALLENGE_HEADER]: challenge }, signal: AbortSignal.timeout(timeoutMs) });
      if (!res.ok) return { ok: false, why: `HTTP ${res.status} from ${url}` };
      const bare = await res.json();
      if (!this.secret || !sameText(bare.proof ?? "", proofOf(this.secret, challenge))) {
        return {
          ok: false,
          foreign: true,
          why:
            `the server on ${this.base} cannot prove it knows this install's secret (another user's, or one ` +
            "started with another LIGHTMEM2_HOME); stop it or set plugins.entries.lightmem2.config.openclaw.port",
        };
      }
      const full = await fetch(url, { headers: { [SECRET_HEADER]: this.secret }, signal: AbortSignal.timeout(timeoutMs) });
      return { ok: true, body: full.ok ? await full.json() : bare };
    } catch (err) {
      return { ok: false, why: String(err?.cause?.code || err?.name || err) };
    }
  }

  async _start() {
    try {
      await this.loadSecret();
    } catch (err) {
      return this._down(err.message);
    }
    const first = await this._probe();
    if (first.ok) return this._up(first.body);
    if (first.foreign) return this._down(first.why);
    if (!this.settings.autoStart) return this._down(`not running at ${this.base} and openclaw.autoStart is false`);
    const { command } = this.settings;
    const { port } = this;
    let exited = null;
    try {
      this.stderr = "";
      const child = spawn(command, ["serve", "--host", "127.0.0.1", "--port", String(port)], {
        stdio: ["ignore", "ignore", "pipe"],
        env: process.env,
      });
      this.child = child;
      child.stderr.on("data", (chunk) => {
        this.stderr = (this.stderr + chunk.toString()).slice(-STDERR_TAIL);
      });
      child.on("error", (err) => {
        exited = `cannot run ${command}: ${err.code || err.message}`;
      });
      child.on("exit", (code, signal) => {
        exited = exited || `${command} serve exited (${signal || `code ${code}`})`;
        if (this.child === child) {
          this.child = null;
          this.ready = false;
        }
      });
      child.unref();
      child.stderr.unref?.();
    } catch (err) {
      return this._down(`cannot run ${command}: ${err.message}`);
    }
    const deadline = Date.now() + this.settings.startTimeoutMs;
    while (Date.now() < deadline) {
      if (exited) return this._down(`${exited}: ${this.stderr.trim().split("\n").slice(-3).join(" | ")}`);
      const probe = await this._probe(500);
      if (probe.ok) return this._up(probe.body);
      if (probe.foreign && !this.child) return this._down(probe.why);
      await new Promise((r) => setTimeout(r, 100));
    }
    this.stop();
    return this._down(`${command} serve did not answer on ${this.base} within ${this.settings.startTimeoutMs} ms`);
  }

  _up(body) {
    this.ready = true;
    this.health = body;
    this.lastError = null;
    return true;
  }

  _down(why) {
    this.ready = false;
    this.lastError = why;
    this.downUntil = Date.now() + this.settings.retryAfterMs;
    this.logger?.warn?.(`lightmem2: sidecar unavailable, OpenClaw runs unmodified: ${why}`);
    return false;
  }

  /** POST a JSON body to a sidecar route; throws on any failure (callers fail open). */
  async post(path, body, retried = false) {
    if (!(await this.ensure())) throw new Error(this.lastError || "sidecar unavailable");
    let res;
    try {
      res = await fetch(`${this.base}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", [SECRET_HEADER]: this.secret },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.settings.requestTimeoutMs),
      });
    } catch (err) {
      this.ready = false;
      this.lastError = `${path}: ${err?.cause?.code || err?.name || err}`;
      throw new Error(this.lastError);
    }
    const data = await res.json().catch(() => ({}));
    if ((res.status === 401 || res.status === 403) && !retried && /X-Lightmem2-Secret/i.test(data.error || "")) {
      // the secret file was replaced (deleted, then recreated): read it again, once
      const before = this.secret;
      if (await this.loadSecret(true).then((v) => v !== before, () => false)) return this.post(path, body, true);
    }
    if (!res.ok) {
      const err = new Error(`${path}: HTTP ${res.status}: ${data.error || ""}`.trim());
      err.status = res.status;
      err.detail = data.error;
      throw err;
    }
    return data;
  }

  /** Run `lightmem2 ARGS...` directly (commands work even when the sidecar is down). */
  cli(args, timeoutMs = 20000) {
    return new Promise((resolve) => {
      execFile(this.settings.command, args, { timeout: timeoutMs, maxBuffer: 8 << 20 }, (err, stdout, stderr) => {
        const text = `${stdout || ""}${stderr || ""}`.trim();
        if (err && !text) resolve(`lightmem2: cannot run ${this.settings.command} (${err.code || err.message})`);
        else resolve(text);
      });
    });
  }

  /** Stop the sidecar if this process started it. */
  stop() {
    const child = this.child;
    this.child = null;
    this.ready = false;
    if (!child || child.exitCode !== null) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.exitCode === null && child.kill("SIGKILL"), 5000);
    timer.unref();
  }

  /** The first line of a command's answer while the sidecar is down (the CLI answers the rest). */
  inactive() {
    const why = this.lastError || `not started yet at ${this.base}`;
    return (
      `lightmem2 is not active in OpenClaw: its sidecar is unavailable (${why}); OpenClaw runs ` +
      "unmodified (fail-open) until it is back; /lightmem2 doctor says what to fix"
    );
  }

  /** One doctor line about the OpenClaw side, from a fresh health check. */
  async describe() {
    if (this.ready) {
      const probe = await this._probe();
      if (probe.ok) this.health = probe.body;
      else this.lastError = probe.why;
      this.ready = probe.ok;
    }
    const merge = this.mergeError
      ? `\n[fail] openclaw.json: plugins.entries.lightmem2.config ${this.mergeError}; fix the key there`
      : "";
    if (this.ready && this.health) {
      const h = this.health;
      return `[pass] openclaw plugin: sidecar at ${this.base} (lightmem2 ${h.version}, mode ${h.mode}, ${h.sessions} sessions)${merge}`;
    }
    const why = this.lastError || `not started yet at ${this.base}`;
    return (
      `[fail] openclaw plugin: sidecar unavailable (${why}); OpenClaw runs unmodified (fail-open)\n` +
      `       fix: check that \`${this.settings.command} serve --port ${this.port}\` starts, ` +
      "or set plugins.entries.lightmem2.config.openclaw.command to the lightmem2 executable" +
      merge
    );
  }
}
