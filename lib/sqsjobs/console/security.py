"""Who may see and change what: the access token, the CSRF token, read-only mode, response headers.

- Bound to a loopback address (the default), only requests whose ``Host``
  names a loopback address are served: a web page elsewhere cannot reach the
  console by pointing its own host name at 127.0.0.1 (DNS rebinding).
- With an access token (required for any other host), every request carries
  it: ``Authorization: Bearer``, the cookie the console sets, or ``?token=``
  once, which becomes that cookie and a redirect to the same page without it.
- Every POST carries the console's CSRF token (a form field), and a POST
  from another origin is refused; read-only mode refuses every POST.
- Every response forbids scripts and styles from anywhere but the console
  itself, framing, sniffing, referrers and caching.

Example:
    >>> guard = Guard(token=None, read_only=True, loopback=True)
    >>> guard.refusal("POST", host="127.0.0.1:8765", token_given=None)
    (403, 'read-only console: nothing can be changed from here')
    >>> guard.refusal("GET", host="evil.example:8765", token_given=None)
    (400, 'unknown host: open the console at the URL it printed')
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qsl

from sqsjobs.console.config import is_loopback

COOKIE: Final = "sqsjobs_console"
CSRF_FIELD: Final = "csrf"
#: form bodies are a few filters: anything larger is not ours
MAX_FORM_BYTES: Final = 16 * 1024
SAFE_METHODS: Final = frozenset({"GET", "HEAD"})
HEADERS: Final = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on a form POST
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def same(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a presented secret.

    Example:
        >>> same("abc", "abc"), same(None, "abc"), same("abd", "abc")
        (True, False, False)
    """
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True, kw_only=True)
class Guard:
    """The console's access rules; :meth:`refusal` says whether and why a request is refused."""

    token: str | None
    read_only: bool
    loopback: bool
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def refusal(self, method: str, *, host: str, token_given: str | None) -> tuple[int, str] | None:
        """``(status, message)`` when the request must be refused before any page is built, else None."""
        if self.loopback and not is_loopback(_hostname(host)):
            return 400, "unknown host: open the console at the URL it printed"
        if self.token is not None and not same(token_given, self.token):
            return 401, "this console needs its token: open the URL `sqsjobs console` printed"
        if method not in SAFE_METHODS and self.read_only:
            return 403, "read-only console: nothing can be changed from here"
        return None

    def form_refusal(self, body: bytes, *, origin: str | None, host: str) -> tuple[int, str] | dict[str, str]:
        """The form of a POST, or ``(403, why)`` without the right CSRF token or from another origin."""
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            return 403, "cross-origin request refused"
        if len(body) > MAX_FORM_BYTES:
            return 413, "form too large"
        form = dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))
        if not same(form.get(CSRF_FIELD), self.csrf_token):
            return 403, "missing or wrong CSRF token: reload the page and try again"
        return form


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


@dataclass(frozen=True)
class Redactor:
    """Removes secrets and environment values from text the pages show (errors and notes).

    Example:
        >>> Redactor.of(["http://127.0.0.1:5000"], environ={}).clean(
        ...     'Could not connect to the endpoint URL: "http://127.0.0.1:5000/"')
        'Could not connect to the endpoint URL: "[redacted]/"'
    """

    values: tuple[str, ...]

    @classmethod
    def of(cls, extra: Iterable[str | None], *, environ: Mapping[str, str] | None = None) -> Redactor:
        """Redact ``extra`` and every environment value of 8 characters or more (longest first)."""
        env = os.environ if environ is None else environ
        found = {v for v in (*extra, *env.values()) if v and len(v) >= 8}
        return cls(tuple(sorted(found, key=len, reverse=True)))

    def clean(self, text: str) -> str:
        """``text`` with every redacted value replaced."""
        for value in self.values:
            text = text.replace(value, "[redacted]")
        return text
