"""The API across a network that drops packets: an API in a network namespace cut off from PostgreSQL while
requests hold connections. Every request, in flight or new, is answered 503 (a problem document) within the
stated bound, and the API answers 200/201 again within seconds of the link's return (tests/support/netns.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn, create_pool, pool_answer_bound_seconds
from pin.local.tcp_ports import free_port
from tests.calendar.worker.test_timeout_processes import wait_for
from tests.support.netns import DEAD_PEER_ENV, CutOffLab, NetworkNamespace, settings_of
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("netns")]

# The cut-off API's dead-peer settings: the production settings, shortened so that the test takes seconds.
CUT_OFF_ENV = {
    **DEAD_PEER_ENV,
    "PIN_DATABASE_CHECK_TIMEOUT_SECONDS": "1",
    "PIN_API_POOL_TIMEOUT_SECONDS": "2",
    "PIN_API_LOCK_TIMEOUT_SECONDS": "1",  # less than the pool's wait (a configuration error otherwise)
}
SETTINGS = settings_of(CUT_OFF_ENV)
# what docs/operations.md states: with the database unreachable, every request is answered within this
ANSWER_BOUND = pool_answer_bound_seconds(SETTINGS, SETTINGS.api.pool_timeout_seconds)
IN_FLIGHT = 4


def slot_body(days: int) -> dict[str, Any]:
    """A valid POST /calendar/slots body, ``days`` from now."""
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=days)
    return {
        "startAt": start.isoformat(),
        "endAt": (start + timedelta(hours=1)).isoformat(),
        "timeZone": "Europe/Moscow",
        "kind": "Showing",
    }


def probe(namespace: NetworkNamespace, port: int, token: str, requests: list[list[Any]]) -> subprocess.Popen[str]:
    """Send ``requests`` ([offset, method, path, body]) to the API from inside the namespace."""
    plan = {"base": f"http://127.0.0.1:{port}", "token": token, "timeout": ANSWER_BOUND + 30, "requests": requests}
    return subprocess.Popen(
        namespace.command([sys.executable, "-m", "tests.support.http_probe", json.dumps(plan)]),
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def answers(process: subprocess.Popen[str], timeout: float) -> list[dict[str, Any]]:
    """The probe's answers, once it has finished."""
    out, _ = process.communicate(timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]  # a warning is no answer
    return [line for line in lines if "index" in line]


def active_from(pool: ConnectionPool[Conn], address: str) -> int:
    """How many sessions from ``address`` are running a statement."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE client_addr = %s::inet AND state = 'active'",
            (address,),
        ).fetchone()
    assert row is not None
    return int(row["n"])  # type: ignore[call-overload]


def test_an_api_cut_off_from_the_database_answers_503_within_the_bound_then_serves(
    netns_lab: CutOffLab,
    cut_database_url: str,
    spawn_role: Callable[..., RoleProcess],
    token: Callable[..., str],
) -> None:
    namespace = netns_lab.namespace
    port = free_port()
    api = spawn_role(
        "api", "--port", str(port), env={**CUT_OFF_ENV, "PIN_DATABASE_URL": cut_database_url},
        prefix=tuple(namespace.command([])),
    )  # fmt: skip
    agent = token(uuid.uuid4(), uuid.uuid4(), "agent")
    pool = create_pool(cut_database_url, min_size=1, max_size=2, name="test-api-cut")
    try:

        def ready() -> bool:
            result = answers(probe(namespace, port, agent, [[0, "GET", "/readyz", None]]), 30)
            return bool(result) and result[0]["status"] == 200

        wait_for(ready, 60, "the API to be ready")
        with pool.connection() as conn:  # each new slot holds its request's connection 3 s
            conn.execute("CREATE FUNCTION public.test_slow_slot() RETURNS trigger LANGUAGE plpgsql AS $$"
                         " BEGIN PERFORM pg_sleep(3); RETURN NEW; END $$")  # fmt: skip
            conn.execute("CREATE TRIGGER test_slow_slot BEFORE INSERT ON calendar.availability_slot"
                         " FOR EACH ROW EXECUTE FUNCTION public.test_slow_slot()")  # fmt: skip
        plan = [[0, "POST", "/calendar/slots", slot_body(3 + i)] for i in range(IN_FLIGHT)]
        new = ((("GET", "/readyz"), None), (("POST", "/calendar/slots"), slot_body(30)))
        plan += [[1.5 + step, method, path, body] for step in range(5) for (method, path), body in new]
        client = probe(namespace, port, agent, plan)
        wait_for(lambda: active_from(pool, namespace.role_address) >= IN_FLIGHT, 10, "the requests in flight")
        namespace.cut()
        cut_at = time.monotonic()
        during = answers(client, ANSWER_BOUND + 40)
        namespace.restore()
        restored_at = time.monotonic()
        with pool.connection() as conn:
            conn.execute("DROP TRIGGER test_slow_slot ON calendar.availability_slot")

        def serves_again() -> bool:
            result = answers(probe(namespace, port, agent, [[0, "POST", "/calendar/slots", slot_body(60)]]), 30)
            return bool(result) and result[0]["status"] == 201

        wait_for(serves_again, 30, "the API to serve again")
        resumed_after = time.monotonic() - restored_at
    finally:
        pool.close()
    api.terminate()

    late = [max(0.0, line["answered"] - max(line["sent"], cut_at)) for line in during]
    print(f"api: slowest answer {max(late):.1f} s after the cut or its request; serves {resumed_after:.1f} s after")
    assert len(during) == IN_FLIGHT + 10
    assert {line["status"] for line in during} == {503}, during
    assert all(line["type"] == "application/problem+json" for line in during)
    assert max(late) <= ANSWER_BOUND + 1.0, (ANSWER_BOUND, during)
    assert resumed_after <= 10
