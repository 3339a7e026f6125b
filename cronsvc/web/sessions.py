"""Browser sessions: signed, expiring, and ended by signing out.

Signing in with a token gives a cookie that holds the token's name, a random session
id, when the session ends, and a fingerprint of the token's secret (an HMAC, not the
secret), signed with itsdangerous under a key the server makes on its first start. The
key lives in the state dir (``.cronsvc/web-session-key``, mode 0600), never in Redis:
whoever reads Redis must not be able to sign sessions. A stolen cookie is thus no
token, and it dies with its session:

- at its end (``--session-ttl``, 12 h by default), which is signed into it: a longer TTL
  after a restart does not revive it;
- when its token is removed or its secret changed (name or fingerprint no longer
  match, once the web is restarted with the new tokens);
- when it signs out. Its id is then appended to ``.cronsvc/web-sessions-ended``, which
  every request with a session cookie reads. Several web processes may serve one state
  dir (``cronsvc up`` restarts its web; a second ``cronsvc web`` beside it): they share
  the key, so each accepts the others' cookies, and through this file each honours the
  others' sign-outs, where a set kept in one process's memory would not. An id leaves
  the file once its session would have ended anyway.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

from cronsvc.errors import ConfigError
from cronsvc.web.tokens import Token

KEY_FILE = "web-session-key"
ENDED_FILE = "web-sessions-ended"


def session_key(state_dir: Path) -> bytes:
    """The key sessions are signed with: made on the first start, read after."""
    path = state_dir / KEY_FILE
    try:
        if not path.exists():
            state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            draft = state_dir / f".{KEY_FILE}.{os.getpid()}"
            fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(48) + "\n")
            try:  # whole or not at all; a server starting beside this one may win
                os.link(draft, path)
            except FileExistsError:
                pass
            finally:
                os.unlink(draft)
        if path.stat().st_mode & 0o077:
            raise ConfigError([f"{path}: others may read the session key: chmod 600 it (or "
                               "delete it, which ends every session)"])
        key = path.read_text().strip()
    except OSError as exc:
        raise ConfigError([f"{path}: cannot keep the session key: {exc.strerror}"]) from None
    if len(key) < 32:
        raise ConfigError([f"{path}: not a session key: delete it to make a new one"])
    return key.encode()


class Sessions:
    """Signs sessions in and out under the key of ``state_dir``."""

    def __init__(self, state_dir: Path, ttl: float) -> None:
        self.key = session_key(state_dir)
        self.ttl = ttl
        self.ended = state_dir / ENDED_FILE
        self.signer = URLSafeTimedSerializer(self.key, salt="cronsvc-session")

    def start(self, token: Token) -> str:
        """A new session of ``token``: the cookie's value."""
        until = int(time.time() + self.ttl)
        return self.signer.dumps({"name": token.name, "id": secrets.token_urlsafe(16),
                                  "until": until, "fp": self._fingerprint(token)})

    def find(self, cookie: str | None, tokens: list[Token]) -> Token | None:
        """The token of a live session, or None."""
        session = self._open(cookie)
        if session is None or session["id"] in self._ended():
            return None
        for token in tokens:
            if token.name == session["name"] and hmac.compare_digest(
                    self._fingerprint(token), session["fp"]):
                return token
        return None

    def end(self, cookie: str | None) -> None:
        """Sign a session out, in every web process of this state dir."""
        session = self._open(cookie)
        if session is None:
            return
        fd = os.open(self.ended, os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            now = time.time()
            keep = [line for line in f.read().splitlines() if _until(line) > now]
            f.seek(0)
            f.truncate()
            f.write("".join(f"{line}\n" for line in [*keep, f"{session['id']} "
                                                              f"{session['until']}"]))

    def _open(self, cookie: str | None) -> dict[str, Any] | None:
        if not cookie:
            return None
        try:
            session = self.signer.loads(cookie, max_age=int(self.ttl))
        except BadSignature:  # forged, altered, or older than the TTL
            return None
        if not isinstance(session, dict) or set(session) != {"name", "id", "until", "fp"} \
                or not isinstance(session["until"], int) or session["until"] <= time.time():
            return None
        return session

    def _ended(self) -> set[str]:
        try:
            with open(self.ended) as f:
                fcntl.flock(f, fcntl.LOCK_SH)  # never a half-rewritten file
                return {line.split()[0] for line in f.read().splitlines() if line.strip()}
        except FileNotFoundError:
            return set()

    def _fingerprint(self, token: Token) -> str:
        return hmac.new(self.key, f"{token.name}\n{token.secret}".encode(),
                        hashlib.sha256).hexdigest()


def _until(line: str) -> int:
    """When the session of a line of the ended file would have ended anyway (0: a line
    that is none)."""
    parts = line.split()
    return int(parts[1]) if len(parts) == 2 and parts[1].isdigit() else 0
