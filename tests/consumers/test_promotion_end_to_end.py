"""Seed 002 AC1 and AC8 end to end: expire-promotions -> outbox -> `pin relay` -> broker -> catalog, news and
notifications; the boost of the targets is removed and the buyer is told «срок истёк».

The purchase is made through the promotion context's own domain and unit of work (its activation event is in
the outbox); the worker (one cycle) and the relay (`pin relay --once`'s drain) run in process.
"""

# ruff: noqa: N802 - test names carry the seed's acceptance criterion ids
from __future__ import annotations

import threading
import uuid
import warnings
from datetime import timedelta

import pytest

from pin.api.auth import mint_token
from pin.bootstrap import build_app, build_relay
from pin.messaging.kafka import ensure_topics
from pin.outbox.relay import RelayConfig
from pin.promotion.domain import Target, TargetKind
from pin.promotion.expiry import ExpirePromotionsConfig, ExpirePromotionsJob
from tests.conftest import JWT_SECRET
from tests.consumers.conftest import FAST_SESSION_TIMEOUT_MS
from tests.consumers.support import in_inbox, notifications_about, rows, running_groups, wait_for
from tests.promotion.support import db_now, purchase_events, seed_purchases

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_AC1_AC8_an_expired_purchase_loses_its_boost_after_the_consumers_handle_the_event(kafka, pool, make_settings):
    settings = make_settings(
        kafka_bootstrap_servers=kafka.bootstrap_servers, kafka_session_timeout_ms=FAST_SESSION_TIMEOUT_MS
    )
    ensure_topics(settings)
    tenant, project, post = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    admin = {
        "Authorization": f"Bearer {mint_token(JWT_SECRET, user_id=uuid.uuid4(), tenant_id=tenant, roles=['admin'])}"
    }

    def relay_once() -> None:
        # `pin relay --once` in process (the same composition as the command, without its process start-up)
        totals = build_relay(settings, pool, RelayConfig()).run(threading.Event(), until_empty=True)
        assert totals["published"] == 1, totals

    with (
        TestClient(build_app(settings, pool), raise_server_exceptions=False) as client,
        running_groups(["catalog", "news", "notifications"], settings, pool),
    ):
        assert (
            client.put(f"/catalog/cards/Project/{project}", json={"published": True}, headers=admin).status_code == 201
        )
        assert client.put(f"/news/posts/{post}", json={"published": True}, headers=admin).status_code == 201

        def boosts() -> tuple[int, int]:
            card = client.get(f"/catalog/cards/Project/{project}", headers=admin).json()["promotionBoost"]
            return card, client.get(f"/news/posts/{post}", headers=admin).json()["promotionBoost"]

        [purchase] = seed_purchases(
            pool,
            ends_at=db_now(pool) - timedelta(seconds=1),
            tenant_id=tenant,
            targets=[Target(TargetKind.PROJECT, project), Target(TargetKind.POST, post)],
        )
        weight = purchase.boost_weight
        relay_once()  # the activation event
        wait_for(lambda: boosts() == (weight, weight), what="the activation's boost")

        result = ExpirePromotionsJob(pool, ExpirePromotionsConfig()).run_once()
        assert result.expired_count == 1
        # AC8: committed Expired, event not handled yet: the shop window still shows the old boost
        assert boosts() == (weight, weight)

        # the Expired event, read before the relay publishes (and deletes) its outbox row
        [expired_event] = purchase_events(pool, "Expired")
        message_id = expired_event["payload"]["MessageId"]
        relay_once()
        wait_for(
            lambda: all(in_inbox(pool, g, message_id) for g in ("catalog", "news", "notifications")),
            what="the expiry handled by every group",
        )
        assert boosts() == (0, 0)  # AC1: the contribution is removed
        [told] = notifications_about(pool, purchase.id)
        assert (told["recipient_user_id"], told["kind"]) == (purchase.buyer_user_id, "PromotionExpired")
        assert "срок истёк" in told["text"]

        # a second cycle publishes no second event (INV-6)
        assert ExpirePromotionsJob(pool, ExpirePromotionsConfig()).run_once().expired_count == 0
        assert purchase_events(pool) == []
    [stored] = rows(pool, "SELECT status, version FROM catalog.purchase WHERE purchase_id = %s", purchase.id)
    assert (stored["status"], stored["version"]) == ("Expired", 2)
