"""The published promotion contract (docs/contracts) matches its model and what the code really writes.

Regenerate the documents with ``python -m pin.promotion.contracts docs/contracts``.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging import topics
from pin.outbox.writer import RELAY_POLICY
from pin.promotion import contracts, service
from pin.promotion.domain import TargetKind
from pin.promotion.expiry import ExpirePromotionsJob
from tests.promotion.support import STANDARD_7D, TOP_1D, db_now, seed_purchases
from tests.support.json_schema import errors, kafka_headers

DOCS = Path(__file__).resolve().parents[2] / "docs" / "contracts"
SCHEMA = DOCS / "pin.promotion.purchase-changed.v1.schema.json"
EVENT = contracts.PromotionPurchaseChangedKafkaEvent


@pytest.mark.unit
def test_committed_documents_are_generated_from_the_model() -> None:
    committed = {path.name: path.read_text(encoding="utf-8") for path in DOCS.glob("*promotion*.json")}
    assert committed == contracts.DOCUMENTS.documents(), "run: python -m pin.promotion.contracts docs/contracts"


@pytest.mark.unit
def test_the_schema_lists_exactly_the_contract_fields_and_the_envelope() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    fields = {info.serialization_alias for info in EVENT.model_fields.values()}
    assert set(schema["properties"]) == fields | {"MessageId", "ContractVersion", "OccurredAt"}
    required = {info.serialization_alias for info in EVENT.model_fields.values() if info.is_required()}
    assert set(schema["required"]) == required | {"MessageId", "ContractVersion", "OccurredAt"}
    assert schema["additionalProperties"] is True
    assert (schema["x-topic"], schema["x-key"]) == (topics.PURCHASE_CHANGED, "PurchaseId")
    # a decimal string, never a float: "1500.00" passes, 1500.0 and "1500.5" do not
    amount = schema["properties"]["Price"]["properties"]["Amount"]
    assert errors(amount, "1500.00") == []
    assert errors(amount, 1500.0)
    assert errors(amount, "1500.5")
    target = {"TargetKind": "Project", "TargetId": str(uuid.uuid4())}
    assert errors(schema["properties"]["Targets"], [target]) == []
    # open (seed 003's rule for every contract): a TargetKind or a field added later is valid v1
    assert errors(schema["properties"]["Targets"], [{**target, "TargetKind": "Villa", "Extra": 1}]) == []
    assert errors(schema["properties"]["Targets"], [{**target, "TargetKind": 1}])
    assert errors(schema["properties"]["Targets"], [{"TargetKind": "Project"}])


@pytest.mark.integration
def test_every_purchase_changed_row_matches_the_published_schema(pool: ConnectionPool[Conn]) -> None:
    now = db_now(pool)
    tenant = uuid.uuid4()
    target = service.TargetInput(TargetKind.PROPERTY_OBJECT, uuid.uuid4())
    kept, cancelled = (
        service.activate_purchase(
            pool,
            tenant_id=tenant,
            buyer_user_id=uuid.uuid4(),
            package_id=STANDARD_7D,
            targets=[target],
            ends_at=None,
            correlation_id="docs-check",
            outbox=RELAY_POLICY,
        )
        for _ in range(2)
    )
    service.cancel_purchase(
        pool, purchase_id=cancelled.id, tenant_id=tenant, if_match=None, correlation_id="docs", outbox=RELAY_POLICY
    )
    seed_purchases(pool, ends_at=now - timedelta(seconds=1), package_id=TOP_1D)
    assert ExpirePromotionsJob(pool).run_once().expired_count == 1
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    asyncapi = json.loads((DOCS / "promotion.asyncapi.json").read_text(encoding="utf-8"))
    (message,) = asyncapi["components"]["messages"].values()
    with pool.connection() as conn:
        rows = conn.execute("SELECT * FROM outbox.message WHERE topic = %s", (topics.PURCHASE_CHANGED,)).fetchall()
    assert {row["payload"]["Status"] for row in rows} == {"Active", "Cancelled", "Expired"}  # type: ignore[index]
    assert kept.id in {uuid.UUID(row["payload"]["PurchaseId"]) for row in rows}  # type: ignore[index]
    for row in rows:
        assert row["message_key"] == row["payload"]["PurchaseId"]  # type: ignore[index]
        assert errors(schema, row["payload"]) == [], row["payload"]
        assert errors(message["payload"], row["payload"]) == []
        assert errors(message["headers"], kafka_headers(row)) == [], kafka_headers(row)  # type: ignore[arg-type]
