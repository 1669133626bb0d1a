"""Bearer JWT authentication (HS256 with PIN_JWT_SECRET, or RS256 with PIN_JWT_PUBLIC_KEY) and roles."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import jwt
from fastapi import Depends, Request

from pin.api.problems import ApiProblem
from pin.settings import ConfigurationError, Settings


class Role(StrEnum):
    """The roles a token may carry."""

    AGENT = "agent"
    INVESTOR = "investor"
    MANAGER = "manager"
    ADMIN = "admin"


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


class TokenVerifier:
    """Checks signature, algorithm, expiry and claims; anything wrong is a 401 problem."""

    def __init__(self, settings: Settings) -> None:
        if settings.jwt_public_key:
            self._key: str = settings.jwt_public_key
            self._algorithm = "RS256"
        elif settings.jwt_secret is not None:
            self._key = settings.jwt_secret.get_secret_value()
            self._algorithm = "HS256"
        else:
            raise ConfigurationError("PIN_JWT_SECRET or PIN_JWT_PUBLIC_KEY must be set for the HTTP API")

    def verify(self, token: str) -> Principal:
        """The principal of a valid token."""
        try:
            claims = jwt.decode(
                token, self._key, algorithms=[self._algorithm], options={"require": list(_REQUIRED_CLAIMS)}
            )
            roles = claims["roles"]
            if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
                raise ValueError("roles must be a list of strings")
            known = frozenset(Role(role) for role in roles if role in Role._value2member_map_)
            return Principal(uuid.UUID(str(claims["sub"])), uuid.UUID(str(claims["tenant_id"])), known)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError) as exc:
            raise ApiProblem(401, "invalid-token", "the bearer token is missing, expired or invalid") from exc


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
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiProblem(401, "invalid-token", "the bearer token is missing, expired or invalid")
    verifier: TokenVerifier = request.app.state.token_verifier
    return verifier.verify(token.strip())


def require_roles(*roles: Role) -> object:
    """FastAPI dependency factory: the caller must hold one of ``roles`` (else 403)."""

    def _dependency(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
        if not principal.has(*roles):
            raise ApiProblem(403, "forbidden", "this operation needs another role")
        return principal

    return Depends(_dependency)
