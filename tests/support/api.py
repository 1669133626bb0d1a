"""A real `pin api` for tests that need the server layer: the process on a free port, raw h11 connections,
tokens and tenants of the test secret."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import h11
import httpx
import jwt

from pin.local.tcp_ports import free_port
from tests.conftest import JWT_SECRET
from tests.support.processes import RoleProcess


def bearer(tenant: uuid.UUID, user: uuid.UUID, *roles: str, **claims: Any) -> dict[str, str]:
    """An Authorization header; ``claims`` override the defaults (exp ten minutes ahead)."""
    payload = {"sub": str(user), "tenant_id": str(tenant), "roles": list(roles), "exp": int(time.time()) + 600}
    return {"Authorization": f"Bearer {jwt.encode({**payload, **claims}, JWT_SECRET, algorithm='HS256')}"}


def slot_body(hours: int = 5, **fields: Any) -> dict[str, Any]:
    """A valid POST /calendar/slots body ``hours`` ahead; ``fields`` override it."""
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=hours)
    body = {"startAt": start.isoformat(), "endAt": (start + timedelta(minutes=30)).isoformat(),
            "timeZone": "Europe/Moscow", "kind": "Showing"}  # fmt: skip
    return {**body, **fields}


@dataclass
class Tenant:
    """One tenant's users and their headers."""

    id: uuid.UUID
    agent: dict[str, str]
    investor: dict[str, str]
    manager: dict[str, str]
    admin: dict[str, str]

    @classmethod
    def new(cls) -> Tenant:
        """A fresh tenant with one user per role."""
        tenant = uuid.uuid4()
        return cls(tenant, *(bearer(tenant, uuid.uuid4(), role) for role in ("agent", "investor", "manager", "admin")))


@dataclass
class ApiServer:
    """A `pin api` subprocess on a free port."""

    port: int
    process: RoleProcess


def start_api(
    spawn_role: Callable[..., RoleProcess], env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
) -> ApiServer:
    """Start `pin api` (uvicorn as `pin api` and `pin up` configure it) with ``env`` (run through ``prefix``, e.g.
    prlimit) and wait for /healthz."""
    port = free_port()
    return wait_ready(spawn_role("api", "--port", str(port), env=env, prefix=prefix), port)


def wait_ready(process: RoleProcess, port: int) -> ApiServer:
    """``process`` once it answers /healthz on ``port``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.process.poll() is None, process.output()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return ApiServer(port, process)
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"pin api did not answer within 60 s: {process.output()}")


class RawConnection:
    """One TCP connection spoken with h11 as a client: reusing it after the server closed it shows as an error,
    and nothing reconnects (unlike the pooled clients, which hide the reconnect)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.conn = h11.Connection(h11.CLIENT)

    def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[h11.Response, bytes]:
        """Send one request on this connection and read its whole response."""
        if self.conn.states == {h11.CLIENT: h11.DONE, h11.SERVER: h11.DONE}:
            self.conn.start_next_cycle()  # raises if the server said it would close
        fields = [("host", "127.0.0.1"), ("content-length", str(len(body))), *headers.items()]
        if body:
            fields.append(("content-type", "application/json"))
        for event in (h11.Request(method=method, target=path, headers=fields), h11.Data(data=body),
                      h11.EndOfMessage()):  # fmt: skip
            self.sock.sendall(self.conn.send(event) or b"")
        return self._response()

    def _response(self) -> tuple[h11.Response, bytes]:
        response: h11.Response | None = None
        chunks: list[bytes] = []
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(self.sock.recv(65_536))
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                assert response is not None
                return response, b"".join(chunks)
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the server closed the connection before answering")

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def header(response: h11.Response, name: str) -> str | None:
    """A response header's value (the last one), or None."""
    values = [value.decode() for key, value in response.headers if key.decode().lower() == name]
    return values[-1] if values else None
