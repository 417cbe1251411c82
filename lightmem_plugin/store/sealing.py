"""Artifacts encrypted at rest: AES-256-GCM with a per-home key, so no archived secret is readable on disk.

Why encryption and not only redaction: a pattern list never covers every credential format (measured:
23 realistic formats had no rule), and redacting an archived output breaks the promise that
``recover`` returns it byte-exact (an agent that recovers a settings file and writes it back would
write ``[REDACTED]`` into it). So the archive keeps the exact bytes, sealed; what lightmem2 derives for
reading (search index, records, ledger, exports, logs) stays redacted.

The key: ``$LIGHTMEM2_ARCHIVE_KEY`` (32 bytes, base64), else ``archive.key`` in the lightmem2 home
(the config dir, apart from the data dir unless ``$LIGHTMEM2_HOME`` joins them), created once from
``os.urandom``, 0600 in a 0700 dir. A sealed file is ``MAGIC + nonce(12) + ciphertext + tag(16)``; the
nonce is random (it is never in text the model sees: stubs name the content hash of the plaintext).
Files without the magic are read as they are (artifacts written before sealing existed).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..atomic import write_private_bytes
from ..errors import ArtifactCorrupt, SecretError
from ..paths import home_dir

MAGIC = b"LM2\x00AESGCM1\n"
NONCE_BYTES = 12
KEY_ENV = "LIGHTMEM2_ARCHIVE_KEY"
KEY_FILE = "archive.key"
OVERHEAD = len(MAGIC) + NONCE_BYTES + 16


def key_path() -> Path:
    """Where the per-home archive key lives."""
    return home_dir() / KEY_FILE


def _decode(raw: str, where: str) -> bytes:
    try:
        key = base64.b64decode(raw.strip(), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise SecretError(
            f"the archive key in {where} is not 32 bytes of base64 (got {len(raw.strip())} chars); "
            f'set it to the output of `python -c "import os,base64;print(base64.b64encode(os.urandom(32)).decode())"`'
        )
    return key


def load_key(path: Path | None = None) -> bytes:
    """The archive key: from the environment, else the key file (created on first use)."""
    env = os.environ.get(KEY_ENV)
    if env:
        return _decode(env, f"${KEY_ENV}")
    path = path or key_path()
    try:
        return _decode(path.read_text(encoding="ascii"), str(path))
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as err:
        raise SecretError(
            f"cannot read the archive key {path}: {err}; fix its permissions or set ${KEY_ENV}"
        ) from None
    key = os.urandom(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(OSError):  # a dir we do not own stays as it is; the key file is 0600
            os.chmod(path.parent, 0o700)
        write_private_bytes(path, base64.b64encode(key) + b"\n", exclusive=True)
    except FileExistsError:  # another process made it first: use theirs
        return _decode(path.read_text(encoding="ascii"), str(path))
    except OSError as err:
        raise SecretError(f"cannot create the archive key {path}: {err}; set ${KEY_ENV}") from None
    return key


class Sealer:
    """Seals and opens artifact bytes with one key."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    @classmethod
    def from_home(cls, path: Path | None = None) -> Sealer:
        """The sealer of this lightmem2 home (key from the environment or the key file)."""
        return cls(load_key(path))

    def seal(self, plain: bytes) -> bytes:
        """``plain`` encrypted and authenticated, in the sealed-file layout."""
        nonce = os.urandom(NONCE_BYTES)
        return MAGIC + nonce + self._aead.encrypt(nonce, plain, MAGIC)

    def open(self, blob: bytes, name: str = "artifact") -> bytes:
        """The plaintext of ``blob`` (unsealed bytes are returned as they are); raises
        :class:`ArtifactCorrupt` when it was altered or sealed with another key."""
        if not blob.startswith(MAGIC):
            return blob
        nonce = blob[len(MAGIC) : len(MAGIC) + NONCE_BYTES]
        try:
            return self._aead.decrypt(nonce, blob[len(MAGIC) + NONCE_BYTES :], MAGIC)
        except InvalidTag:
            raise ArtifactCorrupt(
                f"{name} cannot be decrypted: it was altered, or sealed with another archive key "
                f"(${KEY_ENV} or {key_path()}); restore that key to recover it"
            ) from None


def home_sealer() -> Sealer | None:
    """This home's sealer, or None when no key can be had (``doctor``'s archive key check says why):
    what is stored is then redacted instead of sealed."""
    try:
        return Sealer.from_home()
    except SecretError:
        return None


TEXT_MARK = "lm2sealed1:"
"""What starts a sealed value stored as text (a database column): the sealed layout in base64."""


def seal_text(sealer: Sealer, text: str) -> str:
    """``text`` sealed and stored as ASCII text (:data:`TEXT_MARK` + base64 of the sealed layout)."""
    blob = sealer.seal(text.encode("utf-8", "surrogatepass"))
    return TEXT_MARK + base64.b64encode(blob).decode("ascii")


def open_text(sealer: Sealer | None, text: str, name: str = "stored value") -> str:
    """The plaintext of a :func:`seal_text` value (text without the mark is returned as it is);
    :class:`ArtifactCorrupt` when it was altered, sealed with another key, or no key is at hand."""
    if not text.startswith(TEXT_MARK):
        return text
    if sealer is None:
        raise ArtifactCorrupt(
            f"{name} is sealed and no archive key is at hand; restore ${KEY_ENV} or {key_path()}"
        )
    try:
        blob = base64.b64decode(text[len(TEXT_MARK) :], validate=True)
    except (binascii.Error, ValueError):
        raise ArtifactCorrupt(f"{name} is not valid sealed text; it was altered") from None
    return sealer.open(blob, name).decode("utf-8", "surrogatepass")


def sealed(blob: bytes) -> bool:
    """Whether ``blob`` is in the sealed-file layout."""
    return blob.startswith(MAGIC)
