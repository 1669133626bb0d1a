"""Who may use the console: a JWT with a platform role, from the session cookie ``POST /console/login`` sets or an
``Authorization: Bearer`` header; the CSRF token of a session; the security headers of every console response."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

import jwt
from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pin.api.auth import MAX_TOKEN_BYTES, Principal, Role, TokenVerifier
from pin.api.problems import ApiProblem
from pin.settings import Settings

COOKIE = "pin_console"
PREFIX = "/console"
# viewer reads; operator reads and acts; admin acts as operator
READERS = frozenset({Role.VIEWER, Role.OPERATOR, Role.ADMIN})
ACTORS = frozenset({Role.OPERATOR, Role.ADMIN})

# No inline script or style, nothing from another origin, no framing: what a message holds can never run here.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
)


class ConsoleRefusal(Exception):  # noqa: N818 - an answer (the login page, 403), not a failure of the console
    """A request the console answers with a page of its own: ``status`` 401 (the login page), 403 or 400."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Viewer:
    """Who is looking: the token's principal, how it came (cookie or bearer), the session's CSRF token."""

    principal: Principal
    csrf: str | None  # None: a bearer token, which no other site can make a browser send

    @property
    def can_act(self) -> bool:
        """Whether this viewer may act (replay, discard, park, pause): role operator or admin."""
        return bool(self.principal.roles & ACTORS)

    @property
    def actor(self) -> str:
        """The name the audit trail records: the token's subject (an identifier, no PII)."""
        return str(self.principal.user_id)


def csrf_key(settings: Settings) -> bytes:
    """The key CSRF tokens are made with: derived from the token key, so every API instance agrees."""
    secret = settings.api.jwt_public_key or (
        settings.api.jwt_secret.get_secret_value() if settings.api.jwt_secret else ""
    )
    return hashlib.sha256(b"pin-console-csrf\x00" + secret.encode()).digest()


def csrf_token(settings: Settings, session: str) -> str:
    """The CSRF token of a session (its cookie's token): only a page of this console can know it."""
    return hmac.new(csrf_key(settings), session.encode(), hashlib.sha256).hexdigest()


def _verify(request: Request, token: str) -> Principal:
    """The principal of ``token``; a bad token is the login page (401), a token of another role a 403."""
    if len(token) > MAX_TOKEN_BYTES:
        raise ConsoleRefusal(401, "the token is too long")
    verifier: TokenVerifier = request.app.state.token_verifier
    try:
        principal = verifier.verify(token)
    except ApiProblem as exc:
        raise ConsoleRefusal(exc.status, exc.detail) from None
    if not principal.roles & READERS:
        raise ConsoleRefusal(403, "the console needs the role viewer or operator")
    return principal


def viewer(request: Request) -> Viewer:
    """FastAPI dependency: the console's viewer, from the bearer header, else the session cookie."""
    settings: Settings = request.app.state.settings
    scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and bearer.strip():
        return Viewer(_verify(request, bearer.strip()), csrf=None)
    session = request.cookies.get(COOKIE)
    if not session:
        raise ConsoleRefusal(401, "log in with a token")
    return Viewer(_verify(request, session), csrf=csrf_token(settings, session))


def acting(request: Request, who: Viewer, csrf: str | None) -> Viewer:
    """``who``, when it may act and (a session) the form carried its CSRF token; else a 403."""
    if not who.can_act:
        raise ConsoleRefusal(403, "this action needs the role operator")
    if who.csrf is not None and not (csrf and hmac.compare_digest(csrf, who.csrf)):
        raise ConsoleRefusal(403, "the form's CSRF token is missing or wrong: reload the page and try again")
    del request
    return who


def login_principal(request: Request, token: str) -> Principal:
    """The principal of a token given to the login form (checked as any console request)."""
    return _verify(request, token.strip())


def cookie_seconds(token: str) -> int:
    """How long the session cookie lives: until the token expires (its ``exp`` was checked by the verifier)."""
    claims = jwt.decode(token, options={"verify_signature": False})
    return max(0, int(claims["exp"]) - int(time.time()))


def behind_tls(request: Request) -> bool:
    """Whether the browser reached us over TLS (directly, or through a proxy that says so): the cookie is Secure."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


class SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every response under ``/console`` (pages, refusals, static files)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass through; on a console path, add the headers to the response's start."""
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        async def _send(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(name, value) for name, value in SECURITY_HEADERS if name not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, _send)
