"""The console phase: every page's server time (p50 and p99) over a database holding many relay dead letters, many
dead letters per consumer group and many outbox rows (bench/README.md). Pages are asked in process through the ASGI
app (no network), so a figure is the server's time: its statements and its rendering."""

from __future__ import annotations

import secrets
import statistics
import time
import uuid
import warnings
from typing import Any

from bench.env import BenchEnv
from pin.api.auth import mint_token
from pin.bootstrap import build_app
from pin.db import create_pool
from pin.messaging.topics import APPOINTMENT_CANCELLED, CONSUMER_GROUPS
from pin.settings import Settings

# The bound on a page's server time.
GOAL_MS = 300.0

_SEED_OUTBOX = """
INSERT INTO outbox.message (message_id, vpart, topic, message_key, event_type, contract_version, payload, value,
                            headers, occurred_at)
SELECT gen_random_uuid(), mod(i, 64), %(topic)s, 'key-' || (mod(i, 100000)), 'AppointmentCancelledEvent', 1, '{}', '{}',
       '{}', now()
FROM generate_series(1, %(count)s) AS i
"""
# The floors where a relay's heartbeat would store them once the seeded rows committed (relay/queries.sql,
# relay_floor_advance): just below each vpart's oldest row, under the current snapshot. Without it every reader of the
# floors walks the rows written since the migration's snapshot (docs/design/outbox-storage.md, "What it costs").
_ADVANCE_FLOORS = """
UPDATE outbox.relay_floor l
SET floor_id = coalesce((SELECT min(m.id) FROM outbox.message m WHERE m.vpart = l.vpart) - 1, l.floor_id),
    floor_xmax = pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
    floor_xip = ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(pg_current_snapshot()) AS x), floor_at = now()
"""
_SEED_RELAY_LETTERS = """
INSERT INTO outbox.dead_letter (id, message_id, vpart, topic, message_key, event_type, contract_version, payload,
                                headers, occurred_at, created_at, attempts, error)
SELECT 1000000000 + i, gen_random_uuid(), mod(i, 64), %(topic)s, 'letter-key-' || i, 'AppointmentCancelledEvent', 1,
       jsonb_build_object('AppointmentId', 'letter-key-' || i), '{}', now(), now(), 5,
       CASE WHEN mod(i, 10) = 0 THEN 'MSG_SIZE_TOO_LARGE: refused' ELSE 'timed out' END
FROM generate_series(1, %(count)s) AS i
"""
_SEED_GROUP_LETTERS = """
INSERT INTO messaging.dead_letter_index (consumer_group, topic, "partition", "offset", message_key, key_text,
    message_id, message_value, header_names, header_values, value_size, error_type, error, attempts)
SELECT %(group)s, %(topic)s, mod(i, 3), i, convert_to('group-key-' || i, 'UTF8'), 'group-key-' || i, gen_random_uuid(),
       convert_to('{"MessageId": "x", "Note": "a payload"}', 'UTF8'), '{}', '{}', 40,
       CASE WHEN mod(i, 10) = 0 THEN 'ParkedByOperator' ELSE 'UnreadableMessageError' END, 'not JSON', 3
FROM generate_series(1, %(count)s) AS i
"""


def seed(url: str, *, outbox_rows: int, relay_letters: int, group_letters: int) -> dict[str, float]:
    """Fill the database; the seconds each part took."""
    import psycopg

    took: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for name, sql, params in (
            ("outbox_rows", _SEED_OUTBOX, {"topic": APPOINTMENT_CANCELLED, "count": outbox_rows}),
            ("relay_letters", _SEED_RELAY_LETTERS, {"topic": APPOINTMENT_CANCELLED, "count": relay_letters}),
        ):
            started = time.monotonic()
            conn.execute(sql, params)  # type: ignore[call-overload]
            took[name] = time.monotonic() - started
        conn.execute(_ADVANCE_FLOORS)
        started = time.monotonic()
        for group in CONSUMER_GROUPS:
            conn.execute(_SEED_GROUP_LETTERS, {"group": group, "topic": APPOINTMENT_CANCELLED, "count": group_letters})  # type: ignore[call-overload]
        took["group_letters"] = time.monotonic() - started
        conn.execute("ANALYZE")
    return took


def pages(url: str) -> dict[str, str]:
    """The pages measured: every page of the console, a filtered and a second page of the dead letters."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT min(id) AS first, max(id) AS last FROM messaging.dead_letter_index").fetchone()
    assert row is not None
    first, last = row
    return {
        "overview": "/console",
        "jobs": "/console/jobs",
        "outbox": "/console/outbox",
        "outbox_page_2": "/console/outbox?after=50",
        "groups": "/console/groups",
        "group": "/console/groups/crm",
        "dead_letters": "/console/dead-letters",
        "dead_letters_group_error": "/console/dead-letters?group=news&error=parked",
        "dead_letters_key": "/console/dead-letters?key=group-key-777",
        "dead_letters_page_2": f"/console/dead-letters?before={last - 50}",
        "dead_letters_relay": "/console/dead-letters?kind=relay",
        "dead_letters_relay_error": "/console/dead-letters?kind=relay&error=msg_size",
        "dead_letter": f"/console/dead-letters/group/{first}",
        "relay_dead_letter": "/console/dead-letters/relay/1000000001",
        "key": "/console/keys/key-4242",
        "audit": "/console/audit",
    }


def run(env: BenchEnv, *, outbox_rows: int, relay_letters: int, group_letters: int, tries: int) -> dict[str, Any]:
    """Seed a fresh database, then ask each page ``tries`` times (after one warm-up); p50 and p99 per page."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from fastapi.testclient import TestClient

    url = env.fresh_database("console")
    try:
        seeded = seed(url, outbox_rows=outbox_rows, relay_letters=relay_letters, group_letters=group_letters)
        secret = secrets.token_hex(16)  # this run's only: the tokens below are the only ones it opens to
        settings = Settings.model_validate({"database_url": url, "jwt_secret": secret})
        pool = create_pool(url, min_size=1, max_size=4, name="bench-console")
        token = mint_token(secret, user_id=uuid.uuid4(), tenant_id=uuid.uuid4(), roles=["viewer"])
        measured: dict[str, dict[str, float]] = {}
        try:
            with TestClient(build_app(settings, pool)) as client:
                client.headers["Authorization"] = f"Bearer {token}"
                for name, path in pages(url).items():
                    assert client.get(path).status_code == 200, path  # warm-up, and the page works
                    times = []
                    for _ in range(tries):
                        started = time.perf_counter()
                        answer = client.get(path)
                        times.append((time.perf_counter() - started) * 1000)
                        assert answer.status_code == 200, path
                    times.sort()
                    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
                    measured[name] = {"p50_ms": statistics.median(times), "p99_ms": p99, "tries": tries}
        finally:
            pool.close()
    finally:
        env.drop_database(url)
    sizes = {"outbox_rows": outbox_rows, "relay_letters": relay_letters, "group_letters_per_group": group_letters}
    return {"sizes": sizes, "seed_seconds": seeded, "pages": measured}
