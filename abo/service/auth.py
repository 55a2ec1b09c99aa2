"""Bearer-token auth: tokens from a file or ``ABO_TOKEN``, compared in constant time.

Only SHA-256 digests of the tokens are kept in memory, and no token is ever logged. API clients
send ``Authorization: Bearer <token>``. A browser opening the dashboard posts its token once to
``/login`` and gets an HttpOnly, SameSite=Strict session cookie that does not hold the token:
its value is an expiry time and an HMAC of the token's digest and that time under a key drawn
at random when the process starts. Nobody can recover the token from it, it works only with
the process that issued it (a restart signs everyone out), only while its token is accepted (a
token removed from the token file ends its sessions at once: ``TokenSet`` follows the file),
and it expires after ``SESSION_SECONDS``. Failed logins are limited per client address
(``LoginLimiter``): the address the packets came from, unless the operator names a proxy
(``abo serve --forwarded-allow-ips``); a correct token is never refused.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import os
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from abo.core.exceptions import AboError

ENV_VAR = "ABO_TOKEN"
COOKIE = "abo_session"
SESSION_SECONDS = 12 * 3600
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/login"})
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9-]{1,63})*\.?$")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def _cleaned(tokens: Iterable[str]) -> list[str]:
    return [t.strip() for t in tokens if t and t.strip()]


class TokenSet:
    """The accepted tokens, as digests; an empty set means auth is off.

    With a ``token_file`` the set follows the file: each check compares the file's
    modification time, size and inode with the last read (one ``stat``) and reads it again
    when they changed, and ``reload()`` (on SIGHUP under ``abo serve``) reads it at once. A
    token removed from the file stops working at the next request, and so do the session
    cookies signed for it. A file that cannot be read, or holds no token, leaves only the
    ``tokens`` given beside it (``ABO_TOKEN``): auth never turns off by accident.
    """

    def __init__(self, tokens: Iterable[str] = (), token_file: str | Path | None = None) -> None:
        self._fixed = [_digest(t) for t in _cleaned(tokens)]
        self._file = Path(token_file) if token_file is not None else None
        self._stamp: tuple[int, int, int] | None = None
        self._digests = list(self._fixed)
        self._lock = threading.Lock()
        self._key = secrets.token_bytes(32)  # per process: a restart ends every session
        if self._file is not None:
            self.reload()

    def __bool__(self) -> bool:
        return self._file is not None or bool(self._fixed)

    def _current(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._file) if self._file is not None else None
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino) if st is not None else None

    def reload(self) -> None:
        """Read the token file again now (the tokens given beside it always stay)."""
        if self._file is None:
            return
        with self._lock:
            self._stamp = self._current()
            try:
                lines = self._file.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                lines = []  # unreadable: none of its tokens is accepted
            listed = [ln for ln in lines if not ln.startswith("#")]  # as read_tokens
            self._digests = self._fixed + [_digest(t) for t in _cleaned(listed)]

    def _refresh(self) -> list[bytes]:
        """The digests, read again first if the token file changed since the last read."""
        if self._file is not None and self._current() != self._stamp:
            self.reload()
        return self._digests

    def check(self, token: str | None) -> bool:
        """True when ``token`` is one of the accepted ones (constant time per token)."""
        digests = self._refresh()
        if token is None:
            return False
        given = _digest(token)
        ok = False
        for d in digests:  # no early exit: the time does not say which one matched
            ok |= hmac.compare_digest(given, d)
        return ok

    def _mac(self, digest: bytes, expires: int) -> str:
        return hmac.new(self._key, digest + str(expires).encode(), hashlib.sha256).hexdigest()

    def session(self, token: str, now: float | None = None) -> str:
        """A session cookie value for an accepted ``token`` (it does not reveal the token)."""
        expires = int(time.time() if now is None else now) + SESSION_SECONDS
        return f"{expires}.{self._mac(_digest(token), expires)}"

    def check_session(self, value: str | None, now: float | None = None) -> bool:
        """True when ``value`` is an unexpired session this process issued for a token that is
        still accepted."""
        if not value or "." not in value:
            return False
        stamp, _, mac = value.partition(".")
        if not stamp.isdigit() or len(stamp) > 12 or int(stamp) < (now or time.time()):
            return False
        ok = False
        for d in self._refresh():  # a token removed from the file: its sessions end too
            ok |= hmac.compare_digest(mac.encode(), self._mac(d, int(stamp)).encode())
        return ok


class LoginLimiter:
    """At most ``attempts`` failed logins per client address in ``window`` seconds.

    Kept in memory (a restart forgets it); at most ``max_addresses`` addresses are tracked,
    the oldest dropped first, so a flood of addresses cannot grow it without bound.
    """

    def __init__(self, attempts: int = 5, window: float = 60.0, max_addresses: int = 10_000):
        self.attempts = attempts
        self.window = window
        self.max_addresses = max_addresses
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, address: str, now: float | None = None) -> int | None:
        """Seconds until ``address`` may try again, or ``None`` when it may now."""
        now = time.monotonic() if now is None else now
        with self._lock:
            failures = self._failures.get(address)
            if failures is None:
                return None
            while failures and failures[0] <= now - self.window:
                failures.popleft()
            if not failures:
                del self._failures[address]
                return None
            if len(failures) < self.attempts:
                return None
            return max(1, math.ceil(failures[0] + self.window - now))

    def failed(self, address: str, now: float | None = None) -> None:
        """Count a failed login from ``address``."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if address not in self._failures and len(self._failures) >= self.max_addresses:
                self._failures.pop(next(iter(self._failures)))
            self._failures.setdefault(address, deque()).append(now)


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
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def bind_address(host: str) -> str:
    """The address to bind for ``host``: an IP address (an IPv6 literal's brackets stripped)
    or a host name; ``AboError`` naming ``host`` for anything else."""
    raw = host.strip()
    if raw.startswith("[") or raw.endswith("]"):
        inner = raw[1:-1] if raw.startswith("[") and raw.endswith("]") else None
        try:
            if inner is None or ipaddress.ip_address(inner).version != 6:
                raise ValueError
        except ValueError:
            raise AboError(
                f"host: {host!r} is not a bracketed IPv6 address (write [::1] or ::1)"
            ) from None
        return inner
    try:
        ipaddress.ip_address(raw)
        return raw
    except ValueError:
        pass
    if ":" in raw or not _HOSTNAME.match(raw) or raw.replace(".", "").isdigit():
        raise AboError(f"host: {host!r} is neither an IP address nor a host name")
    return raw


def check_bind(host: str, tokens: TokenSet) -> str:
    """The address to bind for ``host`` (see ``bind_address``); refuses a non-loopback address
    without a token (``AboError`` naming why)."""
    address = bind_address(host)
    if not tokens and not is_loopback(address):
        raise AboError(
            f"host: refusing to bind {host!r} without a token: anyone on the network could "
            f"drive the studies. Pass --token-file FILE or set {ENV_VAR}, or bind 127.0.0.1"
        )
    return address
