"""Bearer JWT authentication (HS256 with PIN_JWT_SECRET, or RS256 with PIN_JWT_PUBLIC_KEY) and roles."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import jwt
from fastapi import Depends, Request

from pin.api.problems import ApiProblem
from pin.settings import ConfigurationError, Settings


class Role(StrEnum):
    """The roles a token may carry: the business API's (agent, investor, manager, admin) and the platform's
    (viewer reads the operator console, operator reads and acts there; admin counts as operator)."""

    AGENT = "agent"
    INVESTOR = "investor"
    MANAGER = "manager"
    ADMIN = "admin"
    VIEWER = "viewer"
    OPERATOR = "operator"


# The roles that open the business API: a token holding only platform roles (viewer, operator) opens none of it.
BUSINESS_ROLES = frozenset({Role.AGENT, Role.INVESTOR, Role.MANAGER, Role.ADMIN})


@dataclass(frozen=True)
class Principal:
    """Who is calling: the token's subject, tenant and roles."""

    user_id: uuid.UUID
    tenant_id: uuid.UUID
    roles: frozenset[Role]

    def has(self, *roles: Role) -> bool:
        """Whether the caller holds any of ``roles``."""
        return bool(self.roles.intersection(roles))


_REQUIRED_CLAIMS = ("sub", "tenant_id", "roles", "exp")

# A bearer token is a few hundred bytes; one this long is refused before it is decoded. Below the server's
# header limit (PIN_HTTP_MAX_HEADER_BYTES, at least 16 KiB), so the caller gets this problem document.
MAX_TOKEN_BYTES = 8_192

# Why a 401 (RFC 6750's error_description; the same words in the problem's detail). They say which of three cases it
# is and nothing more: not which claim or check failed, which would help a forger more than a caller.
_MISSING = "no bearer token: send Authorization: Bearer <token>"
_EXPIRED = "the bearer token has expired"
_UNVERIFIABLE = "the bearer token could not be verified"


def unauthorized(description: str) -> ApiProblem:
    """A 401 whose WWW-Authenticate says why (RFC 6750 section 3): no error code for a missing token, else
    invalid_token with ``description``."""
    challenge = (
        "Bearer" if description == _MISSING else f'Bearer error="invalid_token", error_description="{description}"'
    )
    return ApiProblem(401, "invalid-token", description, headers={"WWW-Authenticate": challenge})


class TokenVerifier:
    """Checks signature, algorithm, expiry, lifetime and claims; anything wrong is a 401 problem."""

    def __init__(self, settings: Settings) -> None:
        if settings.api.jwt_public_key:
            self._key: str = settings.api.jwt_public_key
            self._algorithm = "RS256"
        elif settings.api.jwt_secret is not None:
            self._key = settings.api.jwt_secret.get_secret_value()
            self._algorithm = "HS256"
        else:
            raise ConfigurationError("PIN_JWT_SECRET or PIN_JWT_PUBLIC_KEY must be set for the HTTP API")
        self._max_lifetime = settings.api.jwt_max_lifetime_seconds

    def verify(self, token: str) -> Principal:
        """The principal of a valid token; a token holding none of the API's roles is a 403."""
        try:
            claims = jwt.decode(
                token, self._key, algorithms=[self._algorithm], options={"require": list(_REQUIRED_CLAIMS)}
            )
            self._check_lifetime(claims)
            roles = claims["roles"]
            if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
                raise ValueError("roles must be a list of strings")
            known = frozenset(Role(role) for role in roles if role in Role._value2member_map_)
            principal = Principal(uuid.UUID(str(claims["sub"])), uuid.UUID(str(claims["tenant_id"])), known)
        except jwt.ExpiredSignatureError as exc:  # signature checked first: only an authentic token is "expired"
            raise unauthorized(_EXPIRED) from exc
        except (jwt.PyJWTError, ValueError, TypeError, KeyError, OverflowError) as exc:
            raise unauthorized(_UNVERIFIABLE) from exc
        if not principal.roles:
            # an authentic token whose roles are empty or all unknown grants nothing, not "any role"
            raise ApiProblem(403, "forbidden", f"the token holds none of the roles {', '.join(Role)}")
        return principal

    def _check_lifetime(self, claims: dict[str, Any]) -> None:
        """Refuse a token that lives longer than PIN_JWT_MAX_LIFETIME_SECONDS (from its iat, else from now)."""
        # PyJWT has read exp and iat with int(), and checked that exp is not past and iat not in the future,
        # so exp - iat bounds the time left too
        issued = int(claims["iat"]) if "iat" in claims else int(time.time())
        if int(claims["exp"]) - issued > self._max_lifetime:
            raise ValueError("the token lives longer than the maximum lifetime")


def mint_token(
    secret: str, *, user_id: uuid.UUID, tenant_id: uuid.UUID, roles: list[str], ttl_seconds: int = 3600
) -> str:
    """A development HS256 token (the `pin token` command and tests)."""
    now = int(time.time())
    claims = {
        "sub": str(user_id),
        "tenant_id": str(tenant_id),
        "roles": roles,
        "iat": now,
        "exp": now + ttl_seconds,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


def current_principal(request: Request) -> Principal:
    """FastAPI dependency: the caller, from the Authorization header."""
    header = request.headers.get("authorization", "")
    if len(header) > MAX_TOKEN_BYTES:
        raise ApiProblem(431, "header-too-large", f"the Authorization header is longer than {MAX_TOKEN_BYTES} bytes")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized(_MISSING)
    verifier: TokenVerifier = request.app.state.token_verifier
    principal = verifier.verify(token.strip())
    if not principal.roles & BUSINESS_ROLES:
        # the platform roles open the operator console (cross-tenant by design), never a tenant's data
        raise ApiProblem(403, "forbidden", "the token holds none of the roles agent, investor, manager, admin")
    return principal


def require_roles(*roles: Role) -> object:
    """FastAPI dependency factory: the caller must hold one of ``roles`` (else a 403 that names them)."""
    names = ", ".join(roles)
    needed = (
        f"this operation needs the role {names}"
        if len(roles) == 1
        else f"this operation needs one of the roles {names}"
    )

    def _dependency(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
        if not principal.has(*roles):
            raise ApiProblem(403, "forbidden", needed)
        return principal

    return Depends(_dependency)
