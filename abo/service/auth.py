"""Bearer-token auth: tokens from a file or ``ABO_TOKEN``, compared in constant time.

Only SHA-256 digests of the tokens are kept in memory, and no token is ever logged. A browser
opening the dashboard posts its token once to ``/login`` and gets an HttpOnly, SameSite=Strict
cookie holding it; API clients send ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path

from abo.exceptions import AboError

ENV_VAR = "ABO_TOKEN"
COOKIE = "abo_token"
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/login"})


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenSet:
    """The accepted tokens, as digests; an empty set means auth is off."""

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        cleaned = [t.strip() for t in tokens if t and t.strip()]
        self._digests = [_digest(t) for t in cleaned]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def check(self, token: str | None) -> bool:
        """True when ``token`` is one of the accepted ones (constant time per token)."""
        if token is None:
            return False
        given = _digest(token)
        ok = False
        for d in self._digests:  # no early exit: the time does not say which one matched
            ok |= hmac.compare_digest(given, d)
        return ok


def read_tokens(token_file: str | Path | None = None, env: bool = True) -> list[str]:
    """Tokens from ``token_file`` (one a line, ``#`` comments) and the ``ABO_TOKEN`` variable."""
    tokens: list[str] = []
    if token_file is not None:
        try:
            text = Path(token_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise AboError(f"token_file: cannot read {str(token_file)!r}: {exc.strerror}") from None
        tokens += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
        if not tokens:
            raise AboError(f"token_file: {str(token_file)!r} holds no token")
    if env and os.environ.get(ENV_VAR, "").strip():
        tokens.append(os.environ[ENV_VAR].strip())
    return tokens


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else ``None``."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, tokens: TokenSet) -> None:
    """Refuse to serve on a non-loopback address without a token (``AboError`` naming why)."""
    if not tokens and not is_loopback(host):
        raise AboError(
            f"host: refusing to bind {host!r} without a token: anyone on the network could "
            f"drive the studies. Pass --token-file FILE or set {ENV_VAR}, or bind 127.0.0.1"
        )
