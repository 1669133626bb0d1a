"""The command line does what the console does, through the same code (pin.console.actions): pause and resume,
a dry run of a replay, a discard, each on the audit trail; `pin token` mints the platform roles and refuses an
unknown one."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from psycopg_pool import ConnectionPool
from typer.testing import CliRunner

from pin.cli import app
from pin.db import Conn
from pin.messaging import topics
from pin.messaging.consumer.dead_letters import index
from pin.messaging.consumer.dead_letters.store import Origin
from pin.settings import ConfigurationError
from tests.conftest import JWT_SECRET
from tests.consumers.support import rows

pytestmark = pytest.mark.integration


def _cli(database_url: str, *args: str, code: int = 0) -> Any:
    """Run `pin ...`; ``code`` 2: refused as a configuration error (what `pin` prints in one line, exit 2)."""
    result = CliRunner().invoke(app, list(args), env={"PIN_DATABASE_URL": database_url, "PIN_JWT_SECRET": JWT_SECRET})
    if code == 2:
        assert isinstance(result.exception, ConfigurationError), result.output
    else:
        assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def test_pause_and_resume_from_the_command_line(database_url: str, pool: ConnectionPool[Conn]) -> None:
    _cli(database_url, "pause", "group", "news", "--reason", "reindexing", "--actor", "oncall-1")
    [held] = rows(pool, "SELECT kind, name, actor, reason FROM operations.pause")
    assert held == {"kind": "group", "name": "news", "actor": "oncall-1", "reason": "reindexing"}
    _cli(database_url, "pause", "group", "nope", "--reason", "x", code=2)
    _cli(database_url, "pause", "job", "appointment-timeout", "--reason", " ", code=2)
    done = _cli(database_url, "resume", "group", "news", "--reason", "reindexed")
    assert json.loads(done.stdout)["changed"] is True
    assert not rows(pool, "SELECT 1 FROM operations.pause")
    actions = [r["action"] for r in rows(pool, "SELECT action FROM operations.audit ORDER BY id")]
    assert actions == ["group.pause", "group.resume"]


def test_dry_run_and_discard_of_indexed_letters(database_url: str, pool: ConnectionPool[Conn]) -> None:
    applied = uuid.uuid4()
    with pool.connection() as conn:
        conn.execute(
            'INSERT INTO messaging.inbox (consumer_group, message_id, topic, "partition", "offset")'
            " VALUES ('crm', %s, %s, 0, 0)",
            (applied, topics.APPOINTMENT_CANCELLED),
        )
        for offset, message_id in enumerate((applied, uuid.uuid4())):
            origin = Origin("crm", topics.APPOINTMENT_CANCELLED, 0, offset, 0, "ParkedByOperator", "parked", 4)
            index.write(conn, origin, b"key-1", b"{}", [("message-id", str(message_id).encode())])
    dry = _cli(database_url, "dlq", "replay", "--group", "crm", "--dry-run")
    assert json.loads(dry.stdout) == {"group": "crm", "dryRun": True, "letters": 2, "apply": 1, "skip": 1, "refuse": 0}
    _cli(database_url, "dlq", "discard", "--group", "crm", "--reason", " ", code=2)
    gone = _cli(database_url, "dlq", "discard", "--group", "crm", "--key", "key-1", "--reason", "test data")
    assert json.loads(gone.stdout)["discarded"] == 2
    assert {r["resolution"] for r in rows(pool, "SELECT resolution FROM messaging.dead_letter_index")} == {"discarded"}
    [record] = rows(pool, "SELECT action, target, counts, reason FROM operations.audit")
    assert record == {
        "action": "dlq.discard",
        "target": {"kind": "group", "filter": {"group": "crm", "key": "key-1"}},
        "counts": {"letters": 2},
        "reason": "test data",
    }


def test_pin_token_mints_the_platform_roles_and_refuses_an_unknown_one(database_url: str) -> None:
    user, tenant = str(uuid.uuid4()), str(uuid.uuid4())
    for role in ("viewer", "operator"):
        _cli(database_url, "token", "--user", user, "--tenant", tenant, "--role", role)
    refused = CliRunner().invoke(
        app, ["token", "--user", user, "--tenant", tenant, "--role", "root"], env={"PIN_JWT_SECRET": JWT_SECRET}
    )
    assert refused.exit_code != 0


_RELAY_LETTER = (
    "INSERT INTO outbox.dead_letter (id, message_id, vpart, topic, message_key, event_type, contract_version, payload,"
    " headers, occurred_at, created_at, attempts, error) VALUES (%s, %s, 1, %s, %s, 'AppointmentCancelledEvent', 1,"
    " '{}', '{}', now(), now(), 5, 'MSG_SIZE_TOO_LARGE: refused')"
)


def test_the_relays_dead_letters_are_replayed_and_discarded_on_the_audit_trail_with_a_reason(
    database_url: str, pool: ConnectionPool[Conn]
) -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    with pool.connection() as conn:
        for row_id, message_id in ((1, first), (2, second)):
            conn.execute(_RELAY_LETTER, (row_id, message_id, topics.APPOINTMENT_CANCELLED, f"key-{row_id}"))
    unchanged = (
        "SELECT (SELECT count(*) FROM outbox.dead_letter) AS letters,"
        " (SELECT count(*) FROM operations.audit) AS audited"
    )
    # no reason: refused as `pin dlq park` refuses it (a required option), and nothing changed
    missing = CliRunner().invoke(
        app, ["outbox", "dead-letters", "replay", str(first)], env={"PIN_DATABASE_URL": database_url}
    )
    assert missing.exit_code == 2
    assert "--reason" in missing.output
    _cli(database_url, "outbox", "dead-letters", "replay", str(first), "--reason", " ", code=2)
    _cli(database_url, "outbox", "dead-letters", "discard", str(first), "--reason", "", code=2)
    assert rows(pool, unchanged) == [{"letters": 2, "audited": 0}]

    replayed = _cli(database_url, "outbox", "dead-letters", "replay", str(first), "--reason", "size limit raised",
                    "--actor", "oncall-1")  # fmt: skip
    answer = json.loads(replayed.stdout)
    assert answer["replayed"] == [str(first)]
    assert rows(pool, "SELECT message_id FROM outbox.message") == [{"message_id": first}]
    discarded = _cli(database_url, "outbox", "dead-letters", "discard", str(second), "--reason", "obsolete")
    assert json.loads(discarded.stdout)["discarded"] == str(second)
    assert rows(pool, "SELECT message_id FROM outbox.dead_letter_discarded") == [{"message_id": second}]
    records = rows(pool, "SELECT id, action, actor, target, counts, reason FROM operations.audit ORDER BY id")
    assert [{k: v for k, v in r.items() if k not in ("id", "actor")} for r in records] == [
        {"action": "outbox.replay", "target": {"kind": "relay", "message_id": str(first)}, "counts": {"letters": 1},
         "reason": "size limit raised"},
        {"action": "outbox.discard", "target": {"kind": "relay", "message_id": str(second)},
         "counts": {"letters": 1}, "reason": "obsolete"},
    ]  # fmt: skip
    assert records[0]["id"] == answer["auditId"]
    assert records[0]["actor"] == "oncall-1"

    # nothing left: a named letter is an error (exit 1), --all replays none; neither is recorded
    _cli(database_url, "outbox", "dead-letters", "replay", str(first), "--reason", "again", code=1)
    _cli(database_url, "outbox", "dead-letters", "discard", str(second), "--reason", "again", code=1)
    empty = _cli(database_url, "outbox", "dead-letters", "replay", "--all", "--reason", "sweep")
    assert json.loads(empty.stdout) == {"replayed": [], "auditId": None}
    assert len(rows(pool, "SELECT 1 FROM operations.audit")) == 2
