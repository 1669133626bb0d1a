"""Closed-loop HTTP load on a real `pin api`, each client on its own keep-alive connection, spoken with h11.

Each client loops: an agent creates a slot, an investor books it, lists its notifications, cancels the
appointment. Every request that ends with the connection closed and no answer is classified by where it was
sent: on a **fresh** connection (the server read, or could have read, the head and dropped it: the server's
fault) or on a **reused** one, with how long that connection had been idle (idle at least the server's keep-alive
timeout: the HTTP/1.1 idle-close race, which a client retries on a new connection). Nothing here retries, so
every such request is counted.

    .venv/bin/python -m bench.http_load --clients 500 --seconds 15
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import h11
import httpx

from pin.api.auth import mint_token
from pin.db import migrate
from pin.local.tcp_ports import free_port

SECRET = "bench-http-load-secret-of-at-least-32-bytes"  # noqa: S105 - a throwaway API of this run only


@dataclass
class Tally:
    """What the clients saw."""

    statuses: Counter[int] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    dropped_fresh: int = 0  # closed without an answer on a connection's first request
    dropped_reused: list[float] = field(default_factory=list)  # ... on a reused one: its idle seconds before
    connect_errors: Counter[str] = field(default_factory=Counter)


class DroppedError(Exception):
    """The connection closed (or reset) before the whole response came."""


class Client:
    """One keep-alive connection; reopened when the server closes it (after Connection: close or a drop)."""

    def __init__(self, port: int, tally: Tally) -> None:
        self.port, self.tally = port, tally
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.conn = h11.Connection(h11.CLIENT)
        self.used = 0
        self.idle_since = 0.0

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.conn, self.used = h11.Connection(h11.CLIENT), 0

    def _close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, method: str, path: str, token: str, body: object = None) -> tuple[int, Any]:
        """One request; (0, None) when the connection dropped it (counted), never retried."""
        if self.writer is None or self.conn.our_state is h11.MUST_CLOSE:
            self._close()
            try:
                await self._open()
            except OSError as exc:
                self.tally.connect_errors[type(exc).__name__] += 1
                await asyncio.sleep(0.5)
                return 0, None
        if self.conn.states == {h11.CLIENT: h11.DONE, h11.SERVER: h11.DONE}:
            self.conn.start_next_cycle()
        reused, idle = self.used > 0, time.monotonic() - self.idle_since
        started = time.monotonic()
        try:
            status, answer = await self._exchange(method, path, token, body)
        except (DroppedError, OSError, h11.ProtocolError):
            if reused:
                self.tally.dropped_reused.append(idle)
            else:
                self.tally.dropped_fresh += 1
            self._close()
            return 0, None
        self.tally.statuses[status] += 1
        self.tally.latencies.append(time.monotonic() - started)
        self.used += 1
        self.idle_since = time.monotonic()
        if self.conn.our_state is h11.MUST_CLOSE or self.conn.their_state is h11.MUST_CLOSE:
            self._close()
        return status, answer

    async def _exchange(self, method: str, path: str, token: str, body: object) -> tuple[int, Any]:
        assert self.reader is not None
        assert self.writer is not None
        data = b"" if body is None else json.dumps(body).encode()
        headers = [("host", "bench"), ("authorization", f"Bearer {token}"), ("content-length", str(len(data)))]
        if data:
            headers.append(("content-type", "application/json"))
        out = self.conn.send(h11.Request(method=method, target=path, headers=headers))
        if data:
            out += self.conn.send(h11.Data(data=data)) or b""
        out += self.conn.send(h11.EndOfMessage())
        self.writer.write(out)
        await self.writer.drain()
        status, chunks = 0, []
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                received = await self.reader.read(65_536)
                if not received and status == 0:
                    raise DroppedError
                self.conn.receive_data(received)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                raw = b"".join(chunks)
                return status, json.loads(raw) if raw.startswith((b"{", b"[")) else None
            elif isinstance(event, h11.ConnectionClosed):
                raise DroppedError


def _slot_body(offset_minutes: int) -> dict[str, str]:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=5, minutes=offset_minutes)
    end = start + timedelta(minutes=30)
    return {"startAt": start.isoformat(), "endAt": end.isoformat(), "timeZone": "Europe/Moscow", "kind": "Showing"}


async def _client_loop(port: int, tally: Tally, deadline: float, index: int) -> None:
    tenant = uuid.uuid4()
    agent = mint_token(SECRET, user_id=uuid.uuid4(), tenant_id=tenant, roles=["agent"], ttl_seconds=3600)
    investor = mint_token(SECRET, user_id=uuid.uuid4(), tenant_id=tenant, roles=["investor"], ttl_seconds=3600)
    client = Client(port, tally)
    turn = 0
    while time.monotonic() < deadline:
        turn += 1
        status, slot = await client.request("POST", "/calendar/slots", agent, _slot_body(index * 1000 + turn))
        if status != 201:
            continue
        status, appointment = await client.request("POST", f"/calendar/slots/{slot['id']}/book", investor)
        await client.request("GET", "/notifications", investor)
        if status == 201:
            await client.request("POST", f"/calendar/my/appointments/{appointment['id']}/cancel", investor)
    client._close()


async def _stall(after: float, seconds: float) -> None:
    """Block the clients' event loop once (a starved client process): responses wait unread meanwhile."""
    await asyncio.sleep(after)
    time.sleep(seconds)


async def run_load(port: int, clients: int, seconds: float, stall: float = 0.0) -> Tally:
    """``clients`` closed loops against the API on ``port`` for ``seconds``; the clients stall once if ``stall``."""
    tally = Tally()
    deadline = time.monotonic() + seconds
    stalls = [_stall(seconds / 2, stall)] if stall > 0 else []
    await asyncio.gather(*(_client_loop(port, tally, deadline, i) for i in range(clients)), *stalls)
    return tally


def server_counters(port: int) -> dict[str, float]:
    """The API's own pin_api_* counters."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {
        name: float(value)
        for name, _, value in (line.partition(" ") for line in text.splitlines())
        if name.startswith("pin_api_") and name.endswith("_total")
    }


def summary(tally: Tally) -> dict[str, Any]:
    """The figures of a run."""
    latencies = sorted(tally.latencies)
    p99 = latencies[int(len(latencies) * 0.99)] if latencies else None
    return {
        "answered": sum(tally.statuses.values()),
        "statuses": dict(sorted(tally.statuses.items())),
        "p50_s": latencies[len(latencies) // 2] if latencies else None,
        "p99_s": p99,
        "dropped_on_fresh_connection": tally.dropped_fresh,
        "dropped_on_reused_connection": len(tally.dropped_reused),
        "idle_seconds_before_reused_drops": sorted(round(idle, 2) for idle in tally.dropped_reused),
        "connect_errors": dict(tally.connect_errors),
    }


def main() -> None:
    """Start an embedded PostgreSQL (or use PIN_DATABASE_URL) and a `pin api`, run the load, print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the API process")
    parser.add_argument("--stall", type=float, default=0.0, help="block the clients this long once, mid-run")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pin-http-load-"))
    postgres = None
    url = os.environ.get("PIN_DATABASE_URL")
    if url is None:
        from pin.local.embedded.postgres import EmbeddedPostgres

        postgres = EmbeddedPostgres(work / "postgres")
        postgres.start()
        url = postgres.url
    migrate(url)
    port = free_port()
    env = {**os.environ, "PIN_DATABASE_URL": url, "PIN_JWT_SECRET": SECRET, "PIN_LOG_FORMAT": "json"}
    env.update(item.split("=", 1) for item in options.env)
    with (work / "api.log").open("wb") as log:
        api = subprocess.Popen([sys.executable, "-m", "pin", "api", "--port", str(port)], env=env, stdout=log,
                               stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        load = os.getloadavg()
        figures = summary(asyncio.run(run_load(port, options.clients, options.seconds, options.stall)))
        figures |= {"clients": options.clients, "seconds": options.seconds, "stall": options.stall,
                    "server": server_counters(port), "loadavg_before": load,
                    "loadavg_after": os.getloadavg(), "api_log": str(work / "api.log")}  # fmt: skip
        print(json.dumps(figures, indent=1))
    finally:
        api.send_signal(signal.SIGTERM)
        api.wait(30)
        if postgres is not None:
            postgres.destroy()  # the API's log stays, for reading


if __name__ == "__main__":
    main()
