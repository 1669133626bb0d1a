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
