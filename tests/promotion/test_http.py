"""The promotion HTTP API against a real PostgreSQL: activation, read, cancel, packages; validation,
roles, tenancy, ETag/If-Match and problem documents."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from tests.promotion.support import RUB, STANDARD_7D, TOP_1D, db_now, purchase_events, seed_purchases

# Starlette 1.x warns at import when the test client runs on httpx rather than httpx2 (not installed here).
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration


@pytest.fixture
def tenant() -> uuid.UUID:
    return uuid.uuid4()


@pytest.fixture
def manager(token: Callable[..., str], tenant: uuid.UUID) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(uuid.uuid4(), tenant, 'manager')}"}


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "packageId": str(STANDARD_7D),
        "targets": [{"targetKind": "Project", "targetId": str(uuid.uuid4())}],
    }
    return {**body, **overrides}


def _problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    document: dict[str, Any] = response.json()
    assert document["code"] == code
    assert document["status"] == status
    return document


def test_activation_is_active_at_once_for_the_package_duration(
    client: TestClient, manager: dict[str, str], pool: ConnectionPool[Conn], tenant: uuid.UUID
) -> None:
    target = str(uuid.uuid4())
    before = db_now(pool)

    response = client.post(
        "/promotions", json=_body(targets=[{"targetKind": "PropertyObject", "targetId": target}]), headers=manager
    )

    assert response.status_code == 201, response.text
    body = response.json()
    assert response.headers["ETag"] == '"1"'
    assert response.headers["Location"] == f"/promotions/{body['id']}"
    assert (body["status"], body["paymentStatus"], body["version"]) == ("Active", "NotRequired", 1)
    assert body["tenantId"] == str(tenant)
    assert (body["packageCode"], body["packageKind"], body["boostWeight"]) == ("STANDARD-7D", "Standard", 10)
    assert body["price"] == {"amount": "1500.00", "currencyId": str(RUB), "currency": {"code": "RUB", "symbol": "₽"}}
    assert body["targets"] == [{"targetKind": "PropertyObject", "targetId": target}]
    starts_at, ends_at = _time(body["startsAt"]), _time(body["endsAt"])
    assert before <= starts_at <= db_now(pool)  # StartsAt = now on the database clock
    assert ends_at - starts_at == timedelta(days=7)
    (event,) = purchase_events(pool)
    assert event["message_key"] == body["id"]
    assert (event["payload"]["Status"], event["payload"]["Version"]) == ("Active", 1)
    assert event["payload"]["BuyerUserId"] == body["buyerUserId"]


def test_activation_may_end_earlier_than_the_package(
    client: TestClient, manager: dict[str, str], pool: ConnectionPool[Conn]
) -> None:
    ends_at = db_now(pool) + timedelta(hours=2)

    response = client.post("/promotions", json=_body(endsAt=ends_at.isoformat()), headers=manager)

    assert response.status_code == 201, response.text
    assert _time(response.json()["endsAt"]) == ends_at


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"packageId": str(uuid.uuid4())}, "unknown-package"),
        ({"targets": []}, "no-targets"),
        ({"targets": [{"targetKind": "Villa", "targetId": str(uuid.uuid4())}]}, "unknown-target-kind"),
        (
            {"targets": [{"targetKind": "Post", "targetId": "00000000-0000-0000-0000-000000000001"}] * 2},
            "duplicate-target",
        ),
        ({"endsAt": "2020-01-01T00:00:00Z"}, "ends-at-not-in-future"),
        ({"endsAt": "2999-01-01T00:00:00Z"}, "ends-at-beyond-package"),
        ({"endsAt": "2030-01-01T00:00:00"}, "validation-error"),  # no time zone
        ({"packageId": "not-a-uuid"}, "validation-error"),
        ({"targets": [{"targetKind": "Post"}]}, "validation-error"),
        ({"unexpected": 1}, "validation-error"),
    ],
)
def test_bad_activations_are_422_problems(
    client: TestClient, manager: dict[str, str], pool: ConnectionPool[Conn], overrides: dict[str, Any], code: str
) -> None:
    response = client.post("/promotions", json=_body(**overrides), headers=manager)

    _problem(response, 422, code)
    assert purchase_events(pool) == []


def test_malformed_json_is_400(client: TestClient, manager: dict[str, str]) -> None:
    response = client.post("/promotions", content=b"{not json", headers={**manager, "content-type": "application/json"})
    _problem(response, 400, "malformed-json")


def test_every_route_needs_a_manager(
    client: TestClient, token: Callable[..., str], pool: ConnectionPool[Conn], tenant: uuid.UUID
) -> None:
    (purchase,) = seed_purchases(pool, ends_at=db_now(pool) + timedelta(hours=1), tenant_id=tenant)
    agent = {"Authorization": f"Bearer {token(uuid.uuid4(), tenant, 'agent', 'investor')}"}
    calls = [
        ("GET", "/promotions/packages", None),
        ("POST", "/promotions", _body()),
        ("GET", f"/promotions/{purchase.id}", None),
        ("POST", f"/promotions/{purchase.id}/cancel", None),
    ]
    for method, path, body in calls:
        _problem(client.request(method, path, json=body, headers=agent), 403, "forbidden")
        _problem(client.request(method, path, json=body), 401, "invalid-token")


def test_another_tenants_purchase_is_404_to_read_and_to_cancel(
    client: TestClient, manager: dict[str, str], pool: ConnectionPool[Conn]
) -> None:
    (foreign,) = seed_purchases(pool, ends_at=db_now(pool) + timedelta(hours=1), tenant_id=uuid.uuid4())

    _problem(client.get(f"/promotions/{foreign.id}", headers=manager), 404, "purchase-not-found")
    _problem(client.post(f"/promotions/{foreign.id}/cancel", headers=manager), 404, "purchase-not-found")
    _problem(client.get(f"/promotions/{uuid.uuid4()}", headers=manager), 404, "purchase-not-found")
    _problem(client.get("/promotions/not-a-uuid", headers=manager), 422, "validation-error")
    assert [e["payload"]["Status"] for e in purchase_events(pool)] == ["Active"]


def test_any_manager_of_the_company_reads_its_purchase(
    client: TestClient, manager: dict[str, str], token: Callable[..., str], tenant: uuid.UUID
) -> None:
    created = client.post("/promotions", json=_body(), headers=manager).json()
    colleague = {"Authorization": f"Bearer {token(uuid.uuid4(), tenant, 'manager')}"}

    response = client.get(f"/promotions/{created['id']}", headers=colleague)

    assert response.status_code == 200
    assert response.json() == created
    assert response.headers["ETag"] == '"1"'


def test_cancel_moves_active_to_cancelled_once_then_conflicts(
    client: TestClient, manager: dict[str, str], pool: ConnectionPool[Conn]
) -> None:
    created = client.post("/promotions", json=_body(), headers=manager).json()

    response = client.post(f"/promotions/{created['id']}/cancel", headers=manager)

    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["version"]) == ("Cancelled", 2)
    assert response.headers["ETag"] == '"2"'
    _problem(client.post(f"/promotions/{created['id']}/cancel", headers=manager), 409, "purchase-terminal")
    statuses = [(e["payload"]["Status"], e["payload"]["Version"]) for e in purchase_events(pool)]
    assert statuses == [("Active", 1), ("Cancelled", 2)]


def test_cancel_of_an_expired_purchase_is_409(
    client: TestClient, manager: dict[str, str], pool: ConnectionPool[Conn], tenant: uuid.UUID
) -> None:
    from pin.promotion.expiry import ExpirePromotionsJob

    (purchase,) = seed_purchases(pool, ends_at=db_now(pool) - timedelta(seconds=1), tenant_id=tenant)
    assert ExpirePromotionsJob(pool).run_once().expired_count == 1

    _problem(client.post(f"/promotions/{purchase.id}/cancel", headers=manager), 409, "purchase-terminal")
    assert client.get(f"/promotions/{purchase.id}", headers=manager).json()["status"] == "Expired"


def test_cancel_honours_if_match(client: TestClient, manager: dict[str, str]) -> None:
    created = client.post("/promotions", json=_body(), headers=manager).json()
    url = f"/promotions/{created['id']}/cancel"

    _problem(client.post(url, headers={**manager, "If-Match": '"7"'}), 412, "version-mismatch")
    _problem(client.post(url, headers={**manager, "If-Match": "garbage"}), 400, "bad-if-match")
    response = client.post(url, headers={**manager, "If-Match": '"1"'})

    assert response.status_code == 200
    assert response.json()["status"] == "Cancelled"


def test_packages_on_offer(client: TestClient, manager: dict[str, str]) -> None:
    response = client.get("/promotions/packages", headers=manager)

    assert response.status_code == 200
    packages = {p["code"]: p for p in response.json()}
    assert set(packages) == {"STANDARD-7D", "PREMIUM-14D", "TOP-30D", "TOP-1D"}
    assert packages["TOP-1D"] == {
        "id": str(TOP_1D),
        "code": "TOP-1D",
        "kind": "Top",
        "boostWeight": 50,
        "durationSeconds": 86_400,
        "price": {"amount": "990.00", "currencyId": str(RUB), "currency": {"code": "RUB", "symbol": "₽"}},
    }


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_every_transition_writes_exactly_the_contract_fields(
    client: TestClient, manager: dict[str, str], pool: ConnectionPool[Conn]
) -> None:
    from pin.promotion.contracts import PromotionPurchaseChangedKafkaEvent

    created = client.post("/promotions", json=_body(), headers=manager).json()
    client.post(f"/promotions/{created['id']}/cancel", headers=manager)
    expected_keys = {
        *("PurchaseId", "TenantId", "BuyerUserId", "PackageId", "PackageCode", "PackageKind", "Targets", "Status"),
        *("PaymentStatus", "BoostWeight", "StartsAt", "EndsAt", "Price", "Version"),
        *("MessageId", "ContractVersion", "OccurredAt"),
    }

    events = purchase_events(pool)

    assert [e["payload"]["Status"] for e in events] == ["Active", "Cancelled"]
    for event in events:
        assert set(event["payload"]) == expected_keys  # nothing more (no PII, no free text), nothing less
        assert event["headers"]["correlation-id"]
        assert event["event_type"] == "pin.promotion.purchase-changed"
        parsed = PromotionPurchaseChangedKafkaEvent.model_validate(event["payload"])
        assert parsed.message_key() == event["message_key"] == created["id"]
