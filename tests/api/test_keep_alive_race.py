"""A request that has arrived is never dropped by the idle keep-alive close.

The keep-alive timer of a connection can fire in the same turn of a busy event loop in which the client's next
request arrived, before the loop has read it. uvicorn then closes the connection over the unread request: the
client sees its request dropped with no answer (a reset), though it sent it before the server decided anything.
The test makes that turn happen deterministically on the API's own protocol and config: reading is paused (the
loop "has not read yet"), the next request lands in the socket, the keep-alive timer's handler runs, then reading
resumes. The request is answered. A request sent after the server's close is the client's to retry (RFC 9112
section 9.3.1); see docs/operations.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from uvicorn.server import ServerState

from pin.api.server import ProblemH11Protocol, server_config
from pin.bootstrap import build_app
from pin.settings import Settings

pytestmark = pytest.mark.unit

HEALTHZ = b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n"


async def _answer(reader: asyncio.StreamReader) -> bytes:
    """A whole /healthz response (its body is short and ends the read), or b"" when the server closed."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    except asyncio.IncompleteReadError as closed:
        return closed.partial
    except ConnectionResetError:
        return b""
    length = int(
        next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")).split(b":")[1]
    )
    return head + await reader.readexactly(length)


async def _request_waiting_when_the_keep_alive_fires(settings: Settings) -> bytes:
    config = server_config(build_app(settings, pool=None), settings, host="127.0.0.1", port=0)  # type: ignore[arg-type]
    config.load()
    state, protocols = ServerState(), []

    def factory() -> ProblemH11Protocol:
        protocols.append(ProblemH11Protocol(config, state, {}))
        return protocols[-1]

    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(HEALTHZ)
        assert (await _answer(reader)).startswith(b"HTTP/1.1 200")
        (protocol,) = protocols
        protocol.transport.pause_reading()  # the loop has not read what comes next
        writer.write(HEALTHZ)
        await writer.drain()
        await asyncio.sleep(0.05)  # in the server's socket buffer now
        protocol.timeout_keep_alive_handler()  # the timer fires in that same turn
        protocol.transport.resume_reading()
        return await _answer(reader)
    finally:
        writer.close()
        server.close()


def test_a_request_already_received_when_the_keep_alive_expires_is_answered(
    make_settings: Callable[..., Settings],
) -> None:
    answer = asyncio.run(_request_waiting_when_the_keep_alive_fires(make_settings()))
    assert answer.startswith(b"HTTP/1.1 200"), answer
