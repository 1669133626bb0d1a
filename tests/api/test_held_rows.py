"""One held row never takes the API down: every write route waits a bounded time for it, then answers 409.

Against a real `pin api` (its own pool of 20 connections, its sessions' lock_timeout): another session holds one
record with ``SELECT ... FOR UPDATE``; more writers than the pool has connections ask for that record at once,
while another tenant writes its own record of the same kind and reads ``GET /notifications``. Each writer on the
held row answers a 409 problem document within the bound; every unrelated request answers 200/201 within one lock
timeout and a margin, never a 503 from an exhausted pool. Without the session rule the writers hang for the whole
hold and the unrelated requests time out waiting for a connection.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, LiteralString

import httpx
import psycopg
import pytest

from pin.bootstrap import API_POOL_SIZE, build_app
from pin.settings import Settings
from tests.support.api import ApiServer, Tenant, slot_body, start_api
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LOCK_TIMEOUT = 1.0  # PIN_API_LOCK_TIMEOUT_SECONDS of the API under test
WRITERS = API_POOL_SIZE + 10  # more than the API pool's connections: some wait for a connection, then for the row
# A writer may wait one lock timeout for a connection (every one waiting on the row), then one for the row.
WRITE_BOUND = 2 * LOCK_TIMEOUT + 3.0
UNRELATED_BOUND = LOCK_TIMEOUT + 3.0  # the margin is for a loaded machine
HOLD = 15.0  # the longest the holder keeps the row (what the old code's writers waited for)
TOP_1D = "6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0004"  # a package on offer (promotion seed data)


@dataclass(frozen=True)
class Record:
    """One record of a context: the write on it, and the statement that locks it from another session."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    lock: LiteralString
    key: tuple[object, ...]


def _created(api: httpx.Client, method: str, path: str, headers: dict[str, str], body: object) -> dict[str, Any]:
    response = api.request(method, path, headers=headers, json=body)
    assert response.status_code in {200, 201}, response.text
    result: dict[str, Any] = response.json()
    return result


def card(api: httpx.Client, tenant: Tenant) -> Record:
    """A catalog card; the write replaces it."""
    card_id = uuid.uuid4()
    path = f"/catalog/cards/Project/{card_id}"
    _created(api, "PUT", path, tenant.admin, {"published": True})
    lock: LiteralString = "SELECT 1 FROM catalog.card WHERE tenant_id = %s AND id = %s FOR UPDATE"
    return Record("PUT", path, tenant.admin, {"published": False}, lock, (tenant.id, card_id))


def post(api: httpx.Client, tenant: Tenant) -> Record:
    """A news post; the write replaces it."""
    post_id = uuid.uuid4()
    path = f"/news/posts/{post_id}"
    _created(api, "PUT", path, tenant.admin, {"published": True})
    lock: LiteralString = "SELECT 1 FROM news.post WHERE tenant_id = %s AND id = %s FOR UPDATE"
    return Record("PUT", path, tenant.admin, {"published": False}, lock, (tenant.id, post_id))


def purchase(api: httpx.Client, tenant: Tenant) -> Record:
    """A promotion purchase; the write cancels it."""
    body = {"packageId": TOP_1D, "targets": [{"targetKind": "Project", "targetId": str(uuid.uuid4())}]}
    purchase_id = _created(api, "POST", "/promotions", tenant.manager, body)["id"]
    lock: LiteralString = "SELECT 1 FROM promotion.purchase WHERE id = %s FOR UPDATE"
    return Record("POST", f"/promotions/{purchase_id}/cancel", tenant.manager, None, lock, (purchase_id,))


def slot(api: httpx.Client, tenant: Tenant) -> Record:
    """A calendar slot; the write books it."""
    slot_id = _created(api, "POST", "/calendar/slots", tenant.agent, slot_body())["id"]
    lock: LiteralString = "SELECT 1 FROM calendar.availability_slot WHERE id = %s FOR UPDATE"
    return Record("POST", f"/calendar/slots/{slot_id}/book", tenant.investor, None, lock, (slot_id,))


# Every context with a write route; crm and notifications have none (test_every_write_route_is_covered).
CONTEXTS: dict[str, Callable[[httpx.Client, Tenant], Record]] = {
    "catalog": card,
    "news": post,
    "promotions": purchase,
    "calendar": slot,
}


@dataclass(frozen=True)
class Answer:
    """One request's outcome as a caller sees it."""

    status: int  # 0: no answer (a transport error)
    code: str | None
    seconds: float


def _send(api: httpx.Client, method: str, path: str, headers: dict[str, str], body: object) -> Answer:
    started = time.monotonic()
    try:
        response = api.request(method, path, headers=headers, json=body)
    except httpx.TransportError:
        return Answer(0, None, time.monotonic() - started)
    is_problem = response.headers.get("content-type") == "application/problem+json"
    return Answer(response.status_code, response.json()["code"] if is_problem else None, time.monotonic() - started)


def _unrelated_until(api: httpx.Client, other: Tenant, make: Callable[[httpx.Client, Tenant], Record],
                     done: threading.Event) -> list[Answer]:  # fmt: skip
    """Another tenant's reads and writes of the same context, one after another, until ``done``."""
    answers: list[Answer] = []
    while not done.is_set() or len(answers) < 10:
        answers.append(_send(api, "GET", "/notifications", other.agent, None))
        mine = make(api, other) if len(answers) % 5 == 0 else None  # its own record: never waits on the held one
        if mine is not None:
            answers.append(_send(api, mine.method, mine.path, mine.headers, mine.body))
        time.sleep(0.05)
    return answers


@pytest.fixture
def api(spawn_role: Callable[..., RoleProcess]) -> ApiServer:
    """A real `pin api` whose sessions wait at most LOCK_TIMEOUT for a held row."""
    return start_api(spawn_role, {"PIN_API_LOCK_TIMEOUT_SECONDS": str(LOCK_TIMEOUT)})


@pytest.mark.parametrize("context", sorted(CONTEXTS))
def test_a_held_row_is_a_409_within_the_bound_and_other_requests_keep_answering(
    context: str, api: ApiServer, database_url: str
) -> None:
    make = CONTEXTS[context]
    limits = httpx.Limits(max_connections=WRITERS + 5, max_keepalive_connections=WRITERS + 5)
    with httpx.Client(base_url=f"http://127.0.0.1:{api.port}", timeout=HOLD + 30, limits=limits) as client:
        record, other, done = make(client, Tenant.new()), Tenant.new(), threading.Event()
        with psycopg.connect(database_url) as holder, ThreadPoolExecutor(WRITERS + 1) as pool:
            assert holder.execute(record.lock, record.key).fetchone() is not None
            unrelated = pool.submit(_unrelated_until, client, other, make, done)
            writers: list[Future[Answer]] = [
                pool.submit(_send, client, record.method, record.path, record.headers, record.body)
                for _ in range(WRITERS)
            ]
            wait(writers, timeout=HOLD)  # the old code's writers are still waiting here
            holder.rollback()  # the row is free again
            done.set()
            answers = [writer.result() for writer in writers]
            others = unrelated.result()
    slowest = max(answer.seconds for answer in answers)
    latencies = sorted(answer.seconds for answer in others)
    p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98] if len(latencies) > 1 else latencies[0]
    print(f"{context}: writers {_counts(answers)} slowest {slowest:.2f} s; unrelated {_counts(others)} "
          f"p99 {p99:.3f} s max {latencies[-1]:.3f} s")  # fmt: skip
    assert {(a.status, a.code) for a in answers} == {(409, "concurrent-modification")}, _counts(answers)
    assert slowest <= WRITE_BOUND, slowest
    assert {a.status for a in others} <= {200, 201}, _counts(others)
    assert latencies[-1] <= UNRELATED_BOUND, latencies[-1]


def _counts(answers: list[Answer]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for answer in answers:
        key = f"{answer.status} {answer.code or ''}".strip()
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_every_write_route_is_covered(make_settings: Callable[..., Settings]) -> None:
    """The contexts above are all that write: a new write route elsewhere gets a held-row case here."""
    app = build_app(make_settings(), pool=None)  # type: ignore[arg-type]  # routes only: nothing is served
    paths: dict[str, dict[str, object]] = app.openapi()["paths"]
    writing = {path.split("/")[1] for path, methods in paths.items() if set(methods) - {"get", "head"}}
    assert writing == set(CONTEXTS), writing
