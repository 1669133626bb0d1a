"""A dead letter keeps every column of its row (one list, MOVED_COLUMNS), and a replay puts each back as it was."""

from __future__ import annotations

import pytest

from pin.db import connect
from pin.outbox.dead_letters import dead_letter_replay
from pin.outbox.relay import queries
from pin.outbox.writer import MOVED_COLUMNS, OutboxMode, vpart_of
from tests.outbox.support import event_row, insert_rows

pytestmark = pytest.mark.integration

_COLUMNS = ", ".join(c + "::text" for c in MOVED_COLUMNS)


def test_the_relays_dead_letter_move_and_the_replay_keep_the_value_and_the_header_columns(database_url: str) -> None:
    (row,) = insert_rows(database_url, [event_row("kept", 1, blob="caf\u00e9")])
    with connect(database_url) as conn:
        before = conn.execute(f"SELECT {_COLUMNS} FROM outbox.message").fetchone()  # type: ignore[arg-type]
        conn.execute(
            "UPDATE outbox.relay_lease SET owner = 'r', epoch = 7, expires_at = now() + interval '1 minute'"
            " WHERE vpart = %s",
            (vpart_of(row.key),),
        )
        moved = conn.execute(
            queries.OUTBOX_DEAD_LETTER,
            {"id": before["id"], "owner": "r", "epoch": 7, "error": "MSG_SIZE_TOO_LARGE: x", "permanent": True},
        ).fetchone()
        assert moved is not None  # the relay's statement, under its lease
        letter = conn.execute(f"SELECT {_COLUMNS} FROM outbox.dead_letter").fetchone()  # type: ignore[arg-type]
        conn.commit()
        assert letter == before
        assert before["value"] is not None
        assert (before["correlation_id"], before["traceparent"]) == ("test-run", row.headers["traceparent"])

        assert dead_letter_replay(conn, row.message_id, mode=OutboxMode.RELAY) == [row.message_id]
        after = conn.execute(f"SELECT {_COLUMNS} FROM outbox.message").fetchone()  # type: ignore[arg-type]
    assert after == before  # the same id (the head of its key), value, headers and their columns
