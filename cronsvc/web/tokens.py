"""The web's tokens: where they come from, the one rule a secret must meet, and the guard
against serving beyond this machine with none.

Tokens come from the environment (``CRONSVC_WEB_TOKEN``: operator,
``CRONSVC_WEB_READ_TOKEN``: read-only) or a token file, one ``name role secret`` per
line (role ``read`` or ``operator``). Without any, the web serves on a loopback address
only, and everyone who reaches it is the local operator.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cronsvc.errors import ConfigError
from cronsvc.outbound import is_loopback

Role = Literal["read", "operator"]
ROLES: tuple[Role, ...] = ("read", "operator")
#: The shortest secret: guessing one of 16 random characters over HTTP is hopeless.
MIN_SECRET = 16
#: The variables a token may come from: name, token name, role.
ENV_TOKENS: tuple[tuple[str, str, Role], ...] = (
    ("CRONSVC_WEB_TOKEN", "operator", "operator"),
    ("CRONSVC_WEB_READ_TOKEN", "reader", "read"),
)


@dataclass(frozen=True)
class Token:
    name: str
    role: Role
    secret: str


def check_secret(secret: str, source: str) -> str:
    """``secret`` stripped, if it may be a token's: at least :data:`MIN_SECRET` characters
    and no whitespace inside. ConfigError naming ``source`` (a variable, or file:line)
    otherwise: a blank or short secret is a mistake that would open the web to guessing,
    and a blank one would even count as "a token is set" for :func:`check_bind`."""
    value = secret.strip()
    if not value:
        raise ConfigError([f"{source}: the secret is blank: set one of at least {MIN_SECRET} "
                           "characters, or unset it"])
    if any(c.isspace() for c in value):
        raise ConfigError([f"{source}: the secret has whitespace inside: use one word"])
    if len(value) < MIN_SECRET:
        raise ConfigError([f"{source}: the secret has {len(value)} character"
                           f"{'' if len(value) == 1 else 's'}; at least {MIN_SECRET}"])
    return value


def load_tokens(token_file: str | None = None,
                environ: dict[str, str] | None = None) -> list[Token]:
    """The tokens of the environment and of ``token_file``; ConfigError naming the variable,
    or the file and line, of a bad one. A variable that is set counts, even empty."""
    env = os.environ if environ is None else environ
    tokens = [Token(name, role, check_secret(env[var], var))
              for var, name, role in ENV_TOKENS if var in env]
    if token_file:
        tokens += _read_token_file(Path(token_file))
    names = [t.name for t in tokens]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError([f"web tokens: the name {name!r} is given twice"])
    return tokens


def _read_token_file(path: Path) -> list[Token]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the token file: {exc.strerror}"]) from None
    tokens = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3 or parts[1] not in ROLES:
            raise ConfigError([f"{path}:{n}: expected 'name role secret' with role read or "
                               "operator"])
        name, role, secret = parts
        tokens.append(Token(name, role, check_secret(secret, f"{path}:{n}")))  # type: ignore[arg-type]
    return tokens


def check_bind(host: str, tokens: list[Token]) -> None:
    """Refuse to serve beyond this machine with nobody to ask for a token."""
    if not tokens and not is_loopback(host):
        raise ConfigError([f"refusing to serve the web on {host} without a token: set "
                           "CRONSVC_WEB_TOKEN (or pass --token-file), or serve on 127.0.0.1"])
