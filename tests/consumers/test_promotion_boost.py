"""Seed 002 (AC1 consumer side, A6, «Межсервисные последовательности»): catalog and news keep PromotionBoost.

catalog and news run as real consumers (threads) on one broker and database for the module; cards and posts
arrive through the admin endpoints (the stand-in for the platform's replica feeds) and the boost is read back
through GET, as a client would.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.api.auth import mint_token
from pin.bootstrap import build_app
from pin.db import Conn
from pin.messaging import topics
from pin.settings import Settings
from tests.conftest import JWT_SECRET
from tests.consumers.support import Producing, in_inbox, metric, purchase, rows, running_groups, wait_for

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration


@dataclass
class World:
    """The running consumers, a producer and an API client of one tenant's admin."""

    producer: Producing
    client: TestClient
    pool: ConnectionPool[Conn]
    tenant: uuid.UUID
    admin: dict[str, str]
    reader: dict[str, str]

    def put_card(self, kind: str, card_id: uuid.UUID, *, project: uuid.UUID | None = None, published: bool = True):
        body: dict[str, Any] = {"published": published}
        if project is not None:
            body["projectId"] = str(project)
        response = self.client.put(f"/catalog/cards/{kind}/{card_id}", json=body, headers=self.admin)
        assert response.status_code in (200, 201), response.text
        return response

    def boost(self, kind: str, card_id: uuid.UUID) -> int:
        response = self.client.get(f"/catalog/cards/{kind}/{card_id}", headers=self.reader)
        assert response.status_code == 200, response.text
        value: int = response.json()["promotionBoost"]
        return value

    def post_boost(self, post_id: uuid.UUID) -> int:
        response = self.client.get(f"/news/posts/{post_id}", headers=self.reader)
        assert response.status_code == 200, response.text
        value: int = response.json()["promotionBoost"]
        return value

    def send_and_wait(self, *events: dict[str, Any], groups: tuple[str, ...] = ("catalog", "news")) -> None:
        for event in events:
            self.producer.send(topics.PURCHASE_CHANGED, event)
        # every event, not only the last: events of different purchases go to different partitions, handled in any order
        ids = [event["MessageId"] for event in events]
        wait_for(
            lambda: all(in_inbox(self.pool, g, i) for g in groups for i in ids), what="the purchase events handled"
        )


@pytest.fixture(scope="module")
def running_boost(module_settings: Settings, module_pool: ConnectionPool[Conn]) -> Iterator[Producing]:
    """catalog and news consumers for the whole module."""
    with running_groups(["catalog", "news"], module_settings, module_pool):
        producer = Producing(module_settings.kafka.require_bootstrap_servers())
        yield producer
        producer.close()


@pytest.fixture
def world(running_boost: Producing, module_settings: Settings, module_pool: ConnectionPool[Conn]) -> Iterator[World]:
    """A fresh tenant with an admin (the replica feed) and a manager (a reader)."""
    tenant = uuid.uuid4()

    def auth(role: str) -> dict[str, str]:
        token = mint_token(JWT_SECRET, user_id=uuid.uuid4(), tenant_id=tenant, roles=[role])
        return {"Authorization": f"Bearer {token}"}

    with TestClient(build_app(module_settings, module_pool), raise_server_exceptions=False) as client:
        yield World(running_boost, client, module_pool, tenant, auth("admin"), auth("manager"))


def _recomputed(pool: ConnectionPool[Conn], kind: str, card_id: uuid.UUID) -> int:
    """The boost recomputed in Python from the contribution rows (the invariant GET must match)."""
    [card] = rows(pool, "SELECT * FROM catalog.card WHERE kind = %s AND id = %s", kind, card_id)
    total = 0
    for c in rows(pool, "SELECT * FROM catalog.boost_contribution WHERE active AND tenant_id = %s", card["tenant_id"]):
        direct = (c["target_kind"], c["target_id"]) == (kind, card_id)
        cascade = (
            kind == "PropertyObject"
            and card["published"]
            and (c["target_kind"], c["target_id"]) == ("Project", card["project_id"])
        )
        total += c["boost_weight"] if direct or cascade else 0
    return total


def test_project_boost_cascades_to_its_published_objects(world):
    project, shown, hidden, single, other = (uuid.uuid4() for _ in range(5))
    world.put_card("Project", project)
    world.put_card("PropertyObject", shown, project=project, published=True)
    world.put_card("PropertyObject", hidden, project=project, published=False)
    world.put_card("PropertyObject", single, project=uuid.uuid4())  # a project with no purchase
    world.put_card("PropertyObject", other, project=uuid.uuid4())
    first = purchase(tenant=world.tenant, purchase_id=uuid.uuid4(), targets=[("Project", project)], weight=10)
    second = purchase(
        tenant=world.tenant, purchase_id=uuid.uuid4(), targets=[("Project", project), ("PropertyObject", single)],
        weight=5,
    )  # fmt: skip
    world.send_and_wait(first, second)

    assert world.boost("Project", project) == 15
    assert world.boost("PropertyObject", shown) == 15  # cascaded from its project
    assert world.boost("PropertyObject", hidden) == 0  # not published: no cascade
    assert world.boost("PropertyObject", single) == 5
    assert world.boost("PropertyObject", other) == 0
    for kind, card in (("Project", project), ("PropertyObject", shown), ("PropertyObject", hidden)):
        assert world.boost(kind, card) == _recomputed(world.pool, kind, card)

    # publishing the hidden object makes the project's boost cascade to it
    world.put_card("PropertyObject", hidden, project=project, published=True)
    assert world.boost("PropertyObject", hidden) == 15


@pytest.mark.parametrize("terminal", ["Expired", "Cancelled"])
def test_expired_or_cancelled_purchase_removes_its_contribution(world, terminal):
    project, post = uuid.uuid4(), uuid.uuid4()
    world.put_card("Project", project)
    assert world.client.put(f"/news/posts/{post}", json={"published": True}, headers=world.admin).status_code == 201
    purchase_id = uuid.uuid4()
    targets = [("Project", project), ("Post", post)]
    kept = purchase(tenant=world.tenant, purchase_id=uuid.uuid4(), targets=targets, weight=3)
    world.send_and_wait(kept, purchase(tenant=world.tenant, purchase_id=purchase_id, targets=targets, weight=10))
    assert (world.boost("Project", project), world.post_boost(post)) == (13, 13)

    world.send_and_wait(
        purchase(tenant=world.tenant, purchase_id=purchase_id, targets=targets, weight=10, status=terminal, version=2)
    )
    assert (world.boost("Project", project), world.post_boost(post)) == (3, 3)


def test_duplicate_replay_and_older_version_do_not_change_the_boost(world):
    """A6: a redelivered or replayed event and an older Version after a newer one change nothing."""
    card = uuid.uuid4()
    world.put_card("PropertyObject", card, project=uuid.uuid4())
    purchase_id = uuid.uuid4()
    targets = [("PropertyObject", card)]
    active_v1 = purchase(tenant=world.tenant, purchase_id=purchase_id, targets=targets, weight=7, version=1)
    expired_v2 = purchase(
        tenant=world.tenant, purchase_id=purchase_id, targets=targets, weight=7, version=2, status="Expired"
    )
    world.send_and_wait(active_v1, active_v1)  # delivered twice: same MessageId
    assert world.boost("PropertyObject", card) == 7
    world.send_and_wait(expired_v2)
    assert world.boost("PropertyObject", card) == 0

    replayed_v2 = {**expired_v2, "MessageId": str(uuid.uuid4())}  # the same change published again
    stale_v1 = {**active_v1, "MessageId": str(uuid.uuid4())}  # an older Version arriving after the newer one
    world.send_and_wait(expired_v2, replayed_v2, stale_v1)

    assert world.boost("PropertyObject", card) == 0
    [stored] = rows(world.pool, "SELECT version, status FROM catalog.purchase WHERE purchase_id = %s", purchase_id)
    assert (stored["version"], stored["status"]) == (2, "Expired")
    [contribution] = rows(
        world.pool,
        "SELECT active, purchase_version FROM catalog.boost_contribution WHERE purchase_id = %s",
        purchase_id,
    )
    assert (contribution["active"], contribution["purchase_version"]) == (False, 2)


def test_a_card_that_arrives_late_gets_the_contribution_then(world):
    project, card, post = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    event = purchase(
        tenant=world.tenant, purchase_id=uuid.uuid4(), targets=[("Project", project), ("Post", post)], weight=4
    )
    world.send_and_wait(event)  # nothing in the replica yet: handled, nothing blocked
    assert world.client.get(f"/catalog/cards/Project/{project}", headers=world.reader).status_code == 404

    world.put_card("PropertyObject", card, project=project)  # the object arrives before its project
    assert world.boost("PropertyObject", card) == 4
    world.put_card("Project", project)
    assert world.boost("Project", project) == 4
    assert world.client.put(f"/news/posts/{post}", json={"published": True}, headers=world.admin).status_code == 201
    assert world.post_boost(post) == 4


def test_unknown_target_kind_and_status_take_the_neutral_path(world):
    card = uuid.uuid4()
    world.put_card("Project", card)
    before = metric("pin_consumer_unknown_values_total", group="catalog", field="TargetKind")
    event = purchase(
        tenant=world.tenant, purchase_id=uuid.uuid4(), targets=[("Billboard", uuid.uuid4()), ("Project", card)]
    )
    world.send_and_wait(event)
    assert world.boost("Project", card) == 10
    assert metric("pin_consumer_unknown_values_total", group="catalog", field="TargetKind") == before + 1

    suspended = {**purchase(tenant=world.tenant, purchase_id=uuid.uuid4(), targets=[("Project", card)]),
                 "Status": "Suspended"}  # fmt: skip
    world.send_and_wait(suspended)
    assert world.boost("Project", card) == 10  # an unknown status never boosts


def test_another_tenants_contribution_or_card_is_invisible(world, module_settings, module_pool):
    card = uuid.uuid4()
    world.put_card("Project", card)
    world.send_and_wait(purchase(tenant=uuid.uuid4(), purchase_id=uuid.uuid4(), targets=[("Project", card)]))
    assert world.boost("Project", card) == 0

    stranger = mint_token(JWT_SECRET, user_id=uuid.uuid4(), tenant_id=uuid.uuid4(), roles=["admin"])
    headers = {"Authorization": f"Bearer {stranger}"}
    assert world.client.get(f"/catalog/cards/Project/{card}", headers=headers).status_code == 404
    # ids are scoped by tenant: the stranger's PUT makes the stranger's own card, never a change to this one
    overwrite = world.client.put(f"/catalog/cards/Project/{card}", json={"published": False}, headers=headers)
    assert (overwrite.status_code, overwrite.json()["promotionBoost"]) == (201, 0)
    mine = world.client.get(f"/catalog/cards/Project/{card}", headers=world.reader).json()
    assert (mine["published"], mine["version"]) == (True, 1)


def test_card_and_post_endpoints_reject_bad_requests(world):
    card = uuid.uuid4()
    put = world.client.put
    assert put(f"/catalog/cards/Project/{card}", json={"published": True}, headers=world.reader).status_code == 403
    assert put(f"/catalog/cards/Project/{card}", json={"published": True}).status_code == 401
    assert put(f"/catalog/cards/Galaxy/{card}", json={"published": True}, headers=world.admin).status_code == 422
    bad_project = put(
        f"/catalog/cards/Project/{card}", json={"published": True, "projectId": str(uuid.uuid4())}, headers=world.admin
    )
    assert bad_project.status_code == 422
    assert bad_project.json()["code"] == "validation-error"
    assert put(f"/catalog/cards/Project/{card}", json={"published": "maybe"}, headers=world.admin).status_code == 422
    assert put(f"/news/posts/{card}", json={}, headers=world.admin).status_code == 422
    assert world.client.get("/catalog/cards/Project/not-a-uuid", headers=world.reader).status_code == 422

    created = world.put_card("Project", card)
    assert (created.status_code, created.headers["etag"]) == (201, '"1"')
    updated = put(
        f"/catalog/cards/Project/{card}", json={"published": False}, headers={**world.admin, "If-Match": '"1"'}
    )
    assert (updated.status_code, updated.headers["etag"]) == (200, '"2"')
    stale = put(f"/catalog/cards/Project/{card}", json={"published": True}, headers={**world.admin, "If-Match": '"1"'})
    assert stale.status_code == 412
