"""`pin status`: backlogs, lags and last cycles, for an operator at 3 a.m.

One snapshot, read with cheap bounded queries (every count stops at a cap, every "oldest" is an index-ordered
``LIMIT 1``), so it is safe to run against production and to refresh every few seconds with ``--watch``:

- **workers**: the last cycle of every instance (``jobs.cycle``: when, how long, its counters), the backlog of
  due items and the oldest of them (calendar.appointment Pending past pending_expires_at, promotion.purchase
  Active past ends_at; poison items included), and the poison items, tried again every cycle after the other due
  items (``jobs.item_failure``: how many per job, and the oldest few with their attempts and last error);
- **outbox**: rows waiting per topic and the age of the oldest, rows in backoff, dead letters per topic
  (``outbox.dead_letter``), and which relay instance leases how many of the 64 virtual partitions;
- **consumers**: per group, the last message it processed (``messaging.inbox``), committed offset against end
  offset per partition, and the messages in its dead-letter topic. Broker offsets are informational: the
  embedded broker of ``pin up`` reports wrong watermarks.

Any part that cannot be read (a table of a context that has not been deployed yet, a database or broker that
does not answer) shows "n/a" with the reason; it never stops the rest of the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from pin.messaging import topics
from pin.observability.logging import error_text
from pin.settings import Settings

Conn = psycopg.Connection[dict[str, object]]
T = TypeVar("T")

# Counts stop here: a backlog of 10 001 reads as "10000+" and costs no more than that many index entries.
COUNT_CAP = 10_001
# The outbox is a queue that is normally near empty; its per-topic count reads at most this many rows.
OUTBOX_COUNT_CAP = 100_001
VPARTS = 64
# Worker instances listed per job (most recent last cycle first); older ones are only counted.
SHOWN_INSTANCES = 10
# Poison items listed per job (the longest failing first); the rest are only counted.
SHOWN_POISON_ITEMS = 5


@dataclass(frozen=True)
class WorkerSpec:
    """A polling job and the query of its due items (over its partial index, oldest first)."""

    job: str
    table: str
    due_sql: str
    due_what: str


WORKERS = (
    WorkerSpec(
        job="appointment-timeout",
        table="calendar.appointment",
        # seed 000: Status = Pending && PendingExpiresAt < AsOf (ix_appointments_pending_expires_at)
        due_sql=(
            "SELECT id, pending_expires_at AS due_at FROM calendar.appointment"
            " WHERE status = 'Pending' AND pending_expires_at < now() ORDER BY pending_expires_at, id"
        ),
        due_what="Pending appointments past PendingExpiresAt",
    ),
    WorkerSpec(
        job="expire-promotions",
        table="promotion.purchase",
        # seed 002: Status = Active && EndsAt <= AsOf (ix_purchase_active_ends_at)
        due_sql=(
            "SELECT id, ends_at AS due_at FROM promotion.purchase"
            " WHERE status = 'Active' AND ends_at <= now() ORDER BY ends_at, id"
        ),
        due_what="Active purchases past EndsAt",
    ),
)


class UnavailableError(Exception):
    """A part of the report that cannot be read; its message is what the operator sees after "n/a"."""


# --- database ------------------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.InvalidSchemaName):
        return "not deployed yet (" + (str(exc).splitlines()[0] if str(exc) else "missing table") + ")"
    if isinstance(exc, psycopg.errors.UndefinedColumn):
        return "schema differs (" + str(exc).splitlines()[0] + ")"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def _read(conn: Conn, query: Callable[[Conn], T]) -> T:
    """Run one part's queries in a transaction of their own, so that a missing table spoils only that part."""
    try:
        with conn.transaction():
            return query(conn)
    except psycopg.Error as exc:
        raise UnavailableError(_reason(exc)) from None


def _part(conn: Conn | None, why_not: str, query: Callable[[Conn], dict[str, Any]]) -> dict[str, Any]:
    if conn is None:
        return {"na": why_not}
    try:
        return _read(conn, query)
    except UnavailableError as exc:
        return {"na": str(exc)}


def _seconds(value: object) -> float | None:
    return None if value is None else float(str(value))


def _worker(spec: WorkerSpec) -> Callable[[Conn], dict[str, Any]]:
    def query(conn: Conn) -> dict[str, Any]:
        row = conn.execute(
            f"SELECT count(*) AS n, min(due_at) AS oldest,"
            f" EXTRACT(EPOCH FROM now() - min(due_at))::float8 AS oldest_age"
            f" FROM ({spec.due_sql} LIMIT {COUNT_CAP}) AS due"
        ).fetchone()
        assert row is not None
        oldest_id = conn.execute(f"{spec.due_sql} LIMIT 1").fetchone()
        return {
            "backlog": row["n"],
            "backlogCapped": row["n"] == COUNT_CAP,
            "oldestDueAt": row["oldest"],
            "oldestOverdueSeconds": _seconds(row["oldest_age"]),
            "oldestId": None if oldest_id is None else str(oldest_id["id"]),
        }

    return query


def _cycles(conn: Conn) -> dict[str, Any]:
    rows = conn.execute(
        """
        SELECT job, instance, run_id, as_of, finished_at, duration_ms, counters, succeeded,
               EXTRACT(EPOCH FROM now() - finished_at)::float8 AS age
        FROM jobs.cycle ORDER BY job, finished_at DESC
        """
    ).fetchall()
    by_job: dict[str, list[dict[str, Any]]] = {}
    hidden: dict[str, int] = {}
    for r in rows:
        job = str(r["job"])
        # an instance is host:pid, so every restart adds a row: show the most recent ones, count the rest
        if len(by_job.get(job, [])) >= SHOWN_INSTANCES:
            hidden[job] = hidden.get(job, 0) + 1
            continue
        by_job.setdefault(job, []).append(
            {
                "instance": r["instance"],
                "runId": str(r["run_id"]),
                "asOf": r["as_of"],
                "finishedAt": r["finished_at"],
                "secondsAgo": _seconds(r["age"]),
                "durationMs": r["duration_ms"],
                "succeeded": r["succeeded"],
                "counters": r["counters"],
            }
        )
    return {"byJob": by_job, "hidden": hidden}


def _poison(conn: Conn) -> dict[str, Any]:
    rows = conn.execute(
        """
        SELECT job, count(*) AS items, max(attempts) AS max_attempts, min(first_failed_at) AS since,
               max(last_failed_at) AS last_failed
        FROM jobs.item_failure GROUP BY job
        """
    ).fetchall()
    oldest = conn.execute(
        """
        SELECT job, item_id, attempts, last_error, first_failed_at, last_failed_at
        FROM (SELECT f.*, row_number() OVER (PARTITION BY job ORDER BY first_failed_at, item_id) AS n
              FROM jobs.item_failure AS f) AS ranked
        WHERE n <= %s ORDER BY job, n
        """,
        (SHOWN_POISON_ITEMS,),
    ).fetchall()
    listed: dict[str, list[dict[str, Any]]] = {}
    for r in oldest:
        listed.setdefault(str(r["job"]), []).append(
            {
                "id": str(r["item_id"]),
                "attempts": r["attempts"],
                "lastError": r["last_error"],  # exception type and first line: ids only, never PII
                "failingSince": r["first_failed_at"],
                "lastFailedAt": r["last_failed_at"],
            }
        )
    return {
        "byJob": {
            str(r["job"]): {
                "items": r["items"],
                "maxAttempts": r["max_attempts"],
                "failingSince": r["since"],
                "lastFailedAt": r["last_failed"],
                "oldest": listed.get(str(r["job"]), []),
            }
            for r in rows
        }
    }


def _outbox(conn: Conn) -> dict[str, Any]:
    by_topic = conn.execute(
        f"""
        SELECT topic, count(*) AS rows, EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest_age,
               count(*) FILTER (WHERE next_attempt_at > now()) AS backing_off, max(attempts) AS max_attempts
        FROM (SELECT topic, created_at, next_attempt_at, attempts FROM outbox.message ORDER BY id
              LIMIT {OUTBOX_COUNT_CAP}) AS m
        GROUP BY topic ORDER BY topic
        """
    ).fetchall()
    oldest = conn.execute(
        "SELECT EXTRACT(EPOCH FROM now() - created_at)::float8 AS age FROM outbox.message ORDER BY id LIMIT 1"
    ).fetchone()
    return {
        "lagSeconds": 0.0 if oldest is None else _seconds(oldest["age"]),
        "topics": [
            {
                "topic": r["topic"],
                "rows": r["rows"],
                "oldestSeconds": _seconds(r["oldest_age"]),
                "backingOff": r["backing_off"],
                "maxAttempts": r["max_attempts"],
            }
            for r in by_topic
        ],
        "capped": sum(int(str(r["rows"])) for r in by_topic) >= OUTBOX_COUNT_CAP,
    }


def _dead_letters(conn: Conn) -> dict[str, Any]:
    rows = conn.execute(
        f"""
        SELECT topic, count(*) AS rows, min(dead_lettered_at) AS first_at, max(dead_lettered_at) AS last_at
        FROM (SELECT topic, dead_lettered_at FROM outbox.dead_letter LIMIT {COUNT_CAP}) AS d
        GROUP BY topic ORDER BY topic
        """
    ).fetchall()
    return {"topics": [dict(r) for r in rows], "total": sum(int(str(r["rows"])) for r in rows)}


def _leases(conn: Conn) -> dict[str, Any]:
    rows = conn.execute(
        """
        SELECT owner, count(*) AS vparts, EXTRACT(EPOCH FROM min(expires_at) - now())::float8 AS expires_in
        FROM outbox.relay_lease WHERE owner IS NOT NULL AND expires_at > now()
        GROUP BY owner ORDER BY owner
        """
    ).fetchall()
    owned = sum(int(str(r["vparts"])) for r in rows)
    return {
        "relays": [
            {"owner": r["owner"], "vparts": r["vparts"], "expiresInSeconds": _seconds(r["expires_in"])} for r in rows
        ],
        "unownedVparts": VPARTS - owned,
    }


def _inbox(conn: Conn) -> dict[str, Any]:
    groups: dict[str, Any] = {}
    for group in topics.CONSUMER_GROUPS:
        # per group: an index range over (consumer_group, processed_at), never a scan of the inbox
        row = conn.execute(
            """
            SELECT max(processed_at) AS last_at,
                   EXTRACT(EPOCH FROM now() - max(processed_at))::float8 AS last_age,
                   (SELECT count(*) FROM (SELECT 1 FROM messaging.inbox i
                     WHERE i.consumer_group = %(g)s AND i.processed_at > now() - interval '5 minutes'
                     LIMIT %(cap)s) s) AS last_5_min
            FROM messaging.inbox WHERE consumer_group = %(g)s
            """,
            {"g": group, "cap": COUNT_CAP},
        ).fetchone()
        assert row is not None
        groups[group] = {
            "lastProcessedAt": row["last_at"],
            "lastProcessedSecondsAgo": _seconds(row["last_age"]),
            "processedLast5Min": row["last_5_min"],
        }
    return {"groups": groups}


@contextmanager
def _database(settings: Settings) -> Iterator[tuple[Conn | None, str]]:
    if not settings.database_url:
        yield None, "PIN_DATABASE_URL is not set"
        return
    try:
        conn = psycopg.connect(
            settings.database_url,
            autocommit=True,
            row_factory=psycopg.rows.dict_row,
            connect_timeout=5,
            options="-c statement_timeout=5000",  # a status view never waits on a busy database for long
            application_name="pin-status",
        )
    except psycopg.Error as exc:
        yield None, f"database unreachable ({type(exc).__name__})"
        return
    try:
        yield conn, ""
    finally:
        conn.close()


# --- broker --------------------------------------------------------------------------------------------


def _consumer_offsets(settings: Settings, timeout: float) -> dict[str, Any]:
    """Committed and end offsets per group and partition, and the messages in each group's DLQ topic."""
    if not settings.kafka_bootstrap_servers:
        return {"na": "PIN_KAFKA_BOOTSTRAP_SERVERS is not set"}
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from pin.messaging.groups import topics_of  # the groups' route tables: what each really subscribes to
    from pin.messaging.kafka import client_config, silent_client_logger

    def consumer_of(group: str) -> Any:
        overrides = {
            "group.id": group,  # only to read the group's commits: no subscribe, so it never joins the group
            "enable.auto.commit": False,
            "socket.timeout.ms": max(1000, int(timeout * 1000)),
            "logger": silent_client_logger("pin.status.kafka"),  # the report says "n/a" instead
        }
        return Consumer(client_config(settings, **overrides))

    probe = consumer_of("pin-status")
    try:
        existing = {name: len(meta.partitions) for name, meta in probe.list_topics(timeout=timeout).topics.items()}
    except KafkaException as exc:
        return {"na": f"broker unreachable ({error_text(exc)})"}
    finally:
        probe.close()

    groups: dict[str, Any] = {}
    for group in topics.CONSUMER_GROUPS:
        group_topics = topics_of(group)
        consumer = consumer_of(group)
        try:
            present = [t for t in group_topics if t in existing]
            wanted = [TopicPartition(t, p) for t in present for p in range(existing[t])]
            committed = consumer.committed(wanted, timeout=timeout) if wanted else []
            partitions = []
            for tp in committed:
                low, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=timeout)
                start = tp.offset if tp.offset >= 0 else low  # nothing committed: everything retained is ahead
                partitions.append(
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "committed": tp.offset if tp.offset >= 0 else None,
                        "end": high,
                        "lag": max(0, high - start),
                    }
                )
            dlq = topics.dead_letter_topic(group)
            dead: int | None = None
            if dlq in existing:
                dead = 0
                for p in range(existing[dlq]):
                    low, high = consumer.get_watermark_offsets(TopicPartition(dlq, p), timeout=timeout)
                    dead += max(0, high - low)
            groups[group] = {
                "partitions": partitions,
                "missingTopics": [t for t in (*group_topics, dlq) if t not in existing],
                "deadLettered": dead,
                "deadLetterTopic": dlq,
            }
        except KafkaException as exc:
            groups[group] = {"na": f"broker: {error_text(exc)}"}
        finally:
            consumer.close()
    return {"groups": groups}


# --- the report ----------------------------------------------------------------------------------------


def collect_status(settings: Settings, *, kafka: bool = True, kafka_timeout: float = 3.0) -> dict[str, Any]:
    """One snapshot of everything `pin status` shows, as plain data (also the `--json` output)."""
    report: dict[str, Any] = {}
    with _database(settings) as (conn, why_not):
        report["database"] = {"na": why_not} if conn is None else _part(conn, "", _clock)
        cycles = _part(conn, why_not, _cycles)
        poison = _part(conn, why_not, _poison)
        workers = []
        for spec in WORKERS:
            workers.append(
                {
                    "job": spec.job,
                    "due": spec.due_what,
                    "backlog": _part(conn, why_not, _worker(spec)),
                    "instances": cycles.get("byJob", {}).get(spec.job, []) if "na" not in cycles else cycles,
                    "olderInstances": cycles.get("hidden", {}).get(spec.job, 0),
                    "poison": poison.get("byJob", {}).get(spec.job, {"items": 0}) if "na" not in poison else poison,
                }
            )
        report["workers"] = workers
        report["outbox"] = {
            "backlog": _part(conn, why_not, _outbox),
            "deadLetters": _part(conn, why_not, _dead_letters),
            "leases": _part(conn, why_not, _leases),
        }
        inbox = _part(conn, why_not, _inbox)
    offsets: dict[str, Any] = _consumer_offsets(settings, kafka_timeout) if kafka else {"na": "not asked (--no-kafka)"}
    if "na" in offsets:
        offsets["scope"] = "all"  # one reason for every group: shown once
    consumers = []
    for group in topics.CONSUMER_GROUPS:
        consumers.append(
            {
                "group": group,
                "inbox": inbox if "na" in inbox else inbox["groups"][group],
                "broker": offsets if "na" in offsets else offsets["groups"][group],
            }
        )
    report["consumers"] = consumers
    return report


def _clock(conn: Conn) -> dict[str, Any]:
    row = conn.execute("SELECT now() AS now").fetchone()
    assert row is not None
    return {"now": row["now"]}


# --- rendering ------------------------------------------------------------------------------------------


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d{s % 86_400 // 3600:02d}h"


def _na(part: dict[str, Any]) -> Text:
    return Text(f"n/a: {part['na']}", style="yellow")


def _count(n: object, capped: bool = False) -> str:
    return f"{int(str(n)) - 1}+" if capped else str(n)


def _time(value: object) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%SZ") if isinstance(value, datetime) else "-"


def _workers_table(workers: list[dict[str, Any]]) -> Table:
    table = Table(title="Workers", title_justify="left")
    for column in ("job", "backlog (due now)", "oldest overdue", "poison items", "last cycle"):
        table.add_column(column)
    for worker in workers:
        backlog, poison, instances = worker["backlog"], worker["poison"], worker["instances"]
        backlog_cells: list[Text | str] = (
            [_na(backlog), ""]
            if "na" in backlog
            else [
                Text(_count(backlog["backlog"], backlog["backlogCapped"]), style="red" if backlog["backlog"] else ""),
                "-"
                if backlog["oldestOverdueSeconds"] is None
                else f"{_age(backlog['oldestOverdueSeconds'])} ({backlog['oldestId']})",
            ]
        )
        poison_cell: Text | str = (
            _na(poison)
            if "na" in poison
            else Text(
                f"{poison['items']}" + (f" (up to {poison['maxAttempts']} attempts)" if poison["items"] else ""),
                style="red" if poison["items"] else "",
            )
        )
        if isinstance(instances, dict):  # jobs.cycle could not be read
            last: Text | str = _na(instances)
        elif not instances:
            last = Text("no cycle yet", style="yellow")
        else:
            newest = instances[0]
            last = Text(f"{_age(newest['secondsAgo'])} ago", style="" if newest["succeeded"] else "red")
            if not newest["succeeded"]:
                last.append(" FAILED")
        table.add_row(worker["job"], *backlog_cells, poison_cell, last)
    return table


def _poison_table(workers: list[dict[str, Any]]) -> Table | None:
    """The poison items of every job, the longest failing first (none: no table)."""
    rows = [(w["job"], w["poison"]) for w in workers if "na" not in w["poison"] and w["poison"]["items"]]
    if not rows:
        return None
    table = Table(title="Poison items (jobs.item_failure): tried again every cycle", title_justify="left")
    for column in ("job", "item id", "attempts", "failing since", "last error"):
        table.add_column(column)
    hidden = 0
    for job, poison in rows:
        for item in poison["oldest"]:
            table.add_row(job, item["id"], str(item["attempts"]), _time(item["failingSince"]), item["lastError"])
        hidden += poison["items"] - len(poison["oldest"])
    if hidden:
        table.caption = f"{hidden} more poison items not shown"
    return table


def _cycles_table(workers: list[dict[str, Any]]) -> Table | None:
    rows = [(w["job"], inst) for w in workers if isinstance(w["instances"], list) for inst in w["instances"]]
    if not rows:
        return None
    table = Table(title="Last cycle of each worker instance (jobs.cycle)", title_justify="left")
    for column in ("job", "instance", "finished", "outcome", "took", "counters"):
        table.add_column(column)
    older = sum(w.get("olderInstances", 0) for w in workers)
    if older:
        table.caption = f"{older} older instances (finished earlier, probably restarted) not shown"
    for job, inst in rows:
        counters = ", ".join(f"{k}={v}" for k, v in sorted((inst["counters"] or {}).items()))
        table.add_row(
            job,
            str(inst["instance"]),
            f"{_age(inst['secondsAgo'])} ago",
            Text("ok") if inst["succeeded"] else Text("FAILED", style="red"),
            f"{inst['durationMs']} ms",
            counters,
        )
    return table


def _outbox_table(outbox: dict[str, Any]) -> RenderableType:
    backlog, dead, leases = outbox["backlog"], outbox["deadLetters"], outbox["leases"]
    table = Table(title="Outbox", title_justify="left")
    for column in ("topic", "waiting", "oldest", "in backoff", "dead letters"):
        table.add_column(column)
    if "na" in backlog:
        return Group(Text("Outbox", style="italic"), _na(backlog))
    dead_by_topic = {} if "na" in dead else {d["topic"]: d["rows"] for d in dead["topics"]}
    names = sorted({t["topic"] for t in backlog["topics"]} | set(dead_by_topic))
    rows = {t["topic"]: t for t in backlog["topics"]}
    for name in names:
        row = rows.get(name, {"rows": 0, "oldestSeconds": None, "backingOff": 0})
        dead_rows = dead_by_topic.get(name, 0)
        table.add_row(
            name,
            str(row["rows"]),
            _age(row["oldestSeconds"]),
            str(row["backingOff"]),
            Text(str(dead_rows), style="red bold" if dead_rows else ""),
        )
    summary = Text(f"lag (oldest unpublished row): {_age(backlog['lagSeconds'])}")
    if not names:
        summary.append("   nothing waiting")
    if "na" in dead:
        summary.append("   dead letters: ").append_text(_na(dead))
    if "na" in leases:
        summary.append("   relays: ").append_text(_na(leases))
    else:
        owners = ", ".join(f"{r['owner']} ({r['vparts']})" for r in leases["relays"]) or "none"
        summary.append(f"   relays (vparts leased): {owners}")
        if leases["unownedVparts"]:
            summary.append(f"   {leases['unownedVparts']} of {VPARTS} vparts unowned", style="red")
    return Group(table, summary)


def _consumers_table(consumers: list[dict[str, Any]]) -> Table:
    offsets_na = consumers[0]["broker"] if consumers and consumers[0]["broker"].get("scope") == "all" else None
    table = Table(title="Consumers", title_justify="left")
    for column in ("group", "last processed", "last 5 min", "lag (committed vs end)", "dead-lettered (DLQ topic)"):
        table.add_column(column)
    for consumer in consumers:
        inbox, broker = consumer["inbox"], consumer["broker"]
        inbox_cells: list[Text | str] = (
            [_na(inbox), ""]
            if "na" in inbox
            else [
                "never" if inbox["lastProcessedAt"] is None else f"{_age(inbox['lastProcessedSecondsAgo'])} ago",
                str(inbox["processedLast5Min"]),
            ]
        )
        if "na" in broker and broker is offsets_na:
            broker_cells: list[Text | str] = ["n/a", "n/a"]
        elif "na" in broker:
            broker_cells = [_na(broker), ""]
        else:
            lagging = [p for p in broker["partitions"] if p["lag"]]
            lag_text = (
                ", ".join(f"{p['topic'].split('.')[-2]}[{p['partition']}]={p['lag']}" for p in lagging)
                if lagging
                else ("0" if broker["partitions"] else "no commits yet")
            )
            if broker["missingTopics"]:
                lag_text += f" (missing topics: {len(broker['missingTopics'])}; run `pin topics`)"
            dead = broker["deadLettered"]
            broker_cells = [lag_text, Text("-" if dead is None else str(dead), style="red bold" if dead else "")]
        table.add_row(consumer["group"], *inbox_cells, *broker_cells)
    table.caption = (
        f"broker: n/a: {offsets_na['na']}"
        if offsets_na is not None
        else "broker offsets are informational (the embedded broker's watermarks are wrong)"
    )
    return table


def render(report: dict[str, Any]) -> RenderableType:
    """The report as rich tables."""
    database = report["database"]
    header = Text("pin status", style="bold")
    if "na" in database:
        header.append("   database: ").append_text(_na(database))
    else:
        header.append(f"   database clock {_time(database['now'])}")
    parts: list[RenderableType] = [header, _workers_table(report["workers"])]
    poison = _poison_table(report["workers"])
    if poison is not None:
        parts.append(poison)
    cycles = _cycles_table(report["workers"])
    if cycles is not None:
        parts.append(cycles)
    parts += [_outbox_table(report["outbox"]), _consumers_table(report["consumers"])]
    return Group(*parts)


def run_status(settings: Settings, *, watch: bool, interval: float, as_json: bool, kafka: bool = True) -> int:
    """Print the report once, as JSON, or refreshed in place until Ctrl-C; returns the exit code."""
    if as_json:
        import json

        print(json.dumps(collect_status(settings, kafka=kafka), default=str, sort_keys=True))  # noqa: T201
        return 0
    # a pipe gets a wide page rather than rich's 80 columns; a terminal gets its own width
    console = Console() if Console().is_terminal else Console(width=160)
    if not watch:
        console.print(render(collect_status(settings, kafka=kafka)))
        return 0
    try:
        if console.is_terminal:
            with Live(render(collect_status(settings, kafka=kafka)), console=console, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(render(collect_status(settings, kafka=kafka)), refresh=True)
        else:  # piped: one report after another
            while True:
                console.print(render(collect_status(settings, kafka=kafka)))
                console.rule()
                time.sleep(interval)
    except KeyboardInterrupt:
        return 0
