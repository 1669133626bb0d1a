"""The audit trail of operator actions (pin.operations.audit, operations.audit) on a real PostgreSQL: recorded with
its actor, action, target, counts and reason; read back newest first; a reason and an actor are required; a row is
never updated or deleted."""

from __future__ import annotations

import psycopg
import pytest

from pin.operations import audit

pytestmark = pytest.mark.integration


def test_actions_are_recorded_and_read_back_newest_first(pool):
    with pool.connection() as conn:
        first = audit.record(
            conn, actor="oncall-1", action=audit.DLQ_PARK, reason="purged",
            target={"group": "crm", "topic": "t", "partition": 0, "offset": 7}, counts={"held": 1},
        )  # fmt: skip
        second = audit.record(conn, actor="oncall-2", action="outbox.discard", reason=" a typo ", target={})
        assert second.id > first.id
        assert second.at >= first.at
        assert [r.id for r in audit.recent(conn)] == [second.id, first.id]
        [only] = audit.recent(conn, action=audit.DLQ_PARK)
    assert only == first
    assert (only.actor, only.target, only.counts, only.reason) == (
        "oncall-1",
        {"group": "crm", "topic": "t", "partition": 0, "offset": 7},
        {"held": 1},
        "purged",
    )
    assert second.reason == "a typo"  # stripped
    assert only.as_json()["target"]["offset"] == 7


def test_a_reason_and_an_actor_are_required_and_the_trail_is_append_only(pool):
    with pool.connection() as conn:
        for actor, reason in (("oncall", "  "), (" ", "why")):
            with pytest.raises(audit.AuditError):
                audit.record(conn, actor=actor, action=audit.DLQ_PARK, reason=reason, target={})
        record = audit.record(conn, actor="oncall", action=audit.DLQ_PARK, reason="why", target={})
    for statement in ("UPDATE operations.audit SET reason = 'changed'", "DELETE FROM operations.audit"):
        with pool.connection() as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)  # type: ignore[arg-type]
    with pool.connection() as conn, pytest.raises(psycopg.errors.CheckViolation):  # the table's own guard too
        conn.execute("INSERT INTO operations.audit (actor, action, reason) VALUES ('oncall', 'dlq.park', ' ')")
    with pool.connection() as conn:
        assert [r.reason for r in audit.recent(conn)] == ["why"]
        assert audit.recent(conn)[0].id == record.id
