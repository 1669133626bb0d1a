"""The soak's checker: judges the final history (the database, every topic from offset 0, and what the API
acknowledged) against the system's promises, and writes the evidence next to its JSON summary.

Promises checked (SPEC, seeds 000, 002, 003):
- every due appointment and purchase expired (none still Pending/Active past its deadline);
- every terminal appointment has exactly one appointment-cancelled MessageId, with the Reason, CancelledBy and
  RescheduledToAppointmentId its row implies; no cancellation of a live appointment (phantom);
- every appointment has exactly one appointment-created MessageId; at most one appointment-confirmed; every
  purchase version exactly one purchase-changed MessageId, the last one with the row's Status;
- the outbox is empty, nothing dead-lettered (outbox or consumer dead-letter topics), no poison job items;
- every message reached every group that reads it (its inbox), and took effect exactly once: one crm feed entry
  per terminal appointment, the notifications seed 003 prescribes (one per message and recipient), one boost
  contribution per purchase target with the purchase's last state;
- no slot has two active appointments, and a slot is Booked exactly when it has one;
- catalog and news boosts equal the sum recomputed from the promotion table's Active purchases;
- nothing the API acknowledged was lost or undone.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pin.catalog.cards import card_with_boost
from pin.catalog.domain import CardKind
from pin.consumer_groups import routes_of
from pin.messaging import topics
from pin.news.posts import post_with_boost
from tests.soak.workload import History
from tests.support.kafka import Record, read_topic

TERMINAL = ("Declined", "Cancelled", "Expired")
ACTIVE = ("Pending", "Confirmed")
SAMPLE = 20


def expected_reason(row: dict[str, Any]) -> tuple[str, str | None]:
    """The (Reason, CancelledBy) appointment-cancelled must carry for a terminal appointment row."""
    status, by = row["status"], row["cancelled_by"]
    if status == "Declined":
        return "DeclinedByAgent", None
    if status == "Expired":
        return "Expired", None
    return ("CancelledByInvestor", "Investor") if by == "Investor" else ("CancelledByAgent", "Agent")


def cancellation_recipients(reason: str, rescheduled: bool, agent: str, investor: str) -> list[str]:
    """Seed 003's recipient table for AppointmentCancelled."""
    if rescheduled:
        return []
    return {
        "DeclinedByAgent": [investor],
        "CancelledByAgent": [investor],
        "CancelledByInvestor": [agent],
        "Expired": [investor, agent],
    }.get(reason, [investor, agent])


@dataclass
class Report:
    """Counts and violations; a violation keeps up to SAMPLE ids as evidence."""

    counts: dict[str, Any] = field(default_factory=dict)
    violations: dict[str, dict[str, Any]] = field(default_factory=dict)

    def violation(self, name: str, ids: list[Any], **detail: Any) -> None:
        """Record a violated promise unless ``ids`` is empty."""
        if ids:
            self.violations[name] = {"count": len(ids), "sample": [str(i) for i in ids[:SAMPLE]], **detail}

    def summary(self) -> dict[str, Any]:
        """The JSON summary."""
        return {"ok": not self.violations, "counts": self.counts, "violations": self.violations}


# ------------------------------------------------------------------------------------------------- reading


def read_all_topics(bootstrap: str, *, idle: float = 4.0) -> dict[str, list[Record]]:
    """Every integration and dead-letter topic, from offset 0."""
    names = [*topics.INTEGRATION_TOPICS, *(topics.dead_letter_topic(g) for g in topics.CONSUMER_GROUPS)]
    return {name: read_topic(bootstrap, name, expected=None, timeout=300, idle=idle) for name in names}


def _rows(conn: psycopg.Connection[dict[str, Any]], sql: str, *args: Any) -> list[dict[str, Any]]:
    return list(conn.execute(sql, args).fetchall())


def _scalar(conn: psycopg.Connection[dict[str, Any]], sql: str, *args: Any) -> Any:
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return next(iter(row.values()))


def _by(records: list[Record], field_name: str) -> dict[str, set[str]]:
    """Distinct MessageIds per value of a payload field."""
    result: dict[str, set[str]] = defaultdict(set)
    for record in records:
        payload = record.json()
        result[str(payload[field_name])].add(str(payload["MessageId"]))
    return result


def _latest_by_message(records: list[Record]) -> dict[str, dict[str, Any]]:
    """One payload per MessageId (a republished duplicate carries the same payload)."""
    return {str(r.json()["MessageId"]): r.json() for r in records}


# -------------------------------------------------------------------------------------------------- drain


def outstanding(database_url: str) -> dict[str, int]:
    """What is still to do: overdue Pending appointments, overdue Active purchases, outbox rows."""
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        row = conn.execute(
            """
            SELECT
              (SELECT count(*) FROM calendar.appointment
                WHERE status = 'Pending' AND pending_expires_at < clock_timestamp()) AS pending_overdue,
              (SELECT count(*) FROM promotion.purchase
                WHERE status = 'Active' AND ends_at < clock_timestamp()) AS purchases_overdue,
              (SELECT count(*) FROM calendar.appointment WHERE status = 'Pending') AS pending,
              (SELECT count(*) FROM promotion.purchase WHERE status = 'Active') AS purchases_active,
              (SELECT count(*) FROM outbox.message) AS outbox
            """
        ).fetchone()
    assert row is not None
    return {k: int(v) for k, v in row.items()}


def drain(database_url: str, bootstrap: str, *, timeout: float) -> dict[str, Any]:
    """Wait (polling, with a deadline) until nothing is Pending or Active, the outbox is empty and every group's
    inbox holds every message of its topics; returns how long that took and what was left."""
    started = time.monotonic()
    deadline = started + timeout
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        state = outstanding(database_url)
        if state["pending"] == 0 and state["purchases_active"] == 0 and state["outbox"] == 0:
            break
        time.sleep(1)
    missing: dict[str, int] = {}
    while time.monotonic() < deadline:
        missing = missing_in_inboxes(database_url, read_all_topics(bootstrap, idle=2.0))
        if not any(missing.values()):
            break
        time.sleep(2)
    return {"seconds": round(time.monotonic() - started, 1), "left": state, "inbox_missing": missing}


def missing_in_inboxes(database_url: str, by_topic: dict[str, list[Record]]) -> dict[str, int]:
    """Per group, how many MessageIds of the topics it reads are not in its inbox yet."""
    missing: dict[str, int] = {}
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        for group in topics.CONSUMER_GROUPS:
            wanted = {str(r.json()["MessageId"]) for t in routes_of(group) for r in by_topic.get(t, [])}
            seen = {
                str(r["message_id"])
                for r in conn.execute("SELECT message_id FROM messaging.inbox WHERE consumer_group = %s", (group,))
            }
            missing[group] = len(wanted - seen)
    return missing


# -------------------------------------------------------------------------------------------------- check


def check(database_url: str, bootstrap: str, history: History, evidence: Path) -> dict[str, Any]:
    """Run every check; write the evidence (topics, tables, summary) under ``evidence``; return the summary."""
    evidence.mkdir(parents=True, exist_ok=True)
    by_topic = read_all_topics(bootstrap)
    report = Report()
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        tables = _load(conn)
        _dump(evidence, by_topic, tables, history)
        _check_deadlines(conn, report)
        _check_appointment_events(tables, by_topic, report)
        _check_purchase_events(tables, by_topic, report)
        _check_plumbing(conn, by_topic, report)
        _check_inboxes(tables, by_topic, report)
        _check_crm(tables, report)
        _check_notifications(tables, by_topic, report)
        _check_contributions(tables, report)
        _check_boosts(conn, tables, report)
        _check_slots(tables, report)
        _check_acks(tables, history, report)
    report.counts["topic_messages"] = {t: len(r) for t, r in by_topic.items()}
    report.counts["topic_distinct_message_ids"] = {
        t: len({str(x.json().get("MessageId")) for x in r}) for t, r in by_topic.items() if r
    }
    summary = report.summary()
    (evidence / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    return summary


def _load(conn: psycopg.Connection[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {
        "appointment": _rows(
            conn,
            "SELECT id, tenant_id, slot_id, agent_user_id, investor_user_id, status, cancelled_by, pending_expires_at,"
            " rescheduled_to_appointment_id, rescheduled_from_appointment_id, calendar_event_id, version"
            " FROM calendar.appointment",
        ),
        "slot": _rows(conn, "SELECT id, tenant_id, status FROM calendar.availability_slot"),
        "calendar_event": _rows(conn, "SELECT id, appointment_id, status, version FROM calendar.calendar_event"),
        "purchase": _rows(
            conn, "SELECT id, tenant_id, buyer_user_id, status, version, boost_weight, ends_at FROM promotion.purchase"
        ),
        "purchase_target": _rows(conn, "SELECT purchase_id, target_kind, target_id FROM promotion.purchase_target"),
        "lead_feed_entry": _rows(
            conn,
            "SELECT appointment_id, entry_kind, reason, rescheduled_to_appointment_id, message_id"
            " FROM crm.lead_feed_entry",
        ),
        "notification": _rows(
            conn, "SELECT subject_id, kind, template_key, recipient_user_id, message_id FROM notifications.notification"
        ),
        "inbox": _rows(conn, "SELECT consumer_group, message_id, topic FROM messaging.inbox"),
        "catalog_contribution": _rows(
            conn,
            "SELECT purchase_id, target_kind, target_id, boost_weight, active, purchase_version"
            " FROM catalog.boost_contribution",
        ),
        "news_contribution": _rows(
            conn, "SELECT purchase_id, post_id, boost_weight, active, purchase_version FROM news.boost_contribution"
        ),
        "card": _rows(conn, "SELECT kind, id, tenant_id, project_id, published FROM catalog.card"),
        "post": _rows(conn, "SELECT id, tenant_id, published FROM news.post"),
    }


def _dump(
    evidence: Path, by_topic: dict[str, list[Record]], tables: dict[str, list[dict[str, Any]]], history: History
) -> None:
    with (evidence / "topics.jsonl").open("w") as out:
        for name, records in by_topic.items():
            for r in records:
                out.write(json.dumps({"topic": name, "partition": r.partition, "offset": r.offset, "key": r.key,
                                      "value": r.json()}) + "\n")  # fmt: skip
    for name, rows in tables.items():
        (evidence / f"{name}.json").write_text(json.dumps(rows, default=str))
    (evidence / "acks.json").write_text(
        json.dumps(
            {
                "appointments": history.appointment_acks,
                "purchases": history.purchase_acks,
                "targets": history.target_acks,
                "ops": dict(history.ops),
            },
            default=str,
        )
    )


def _check_deadlines(conn: psycopg.Connection[dict[str, Any]], report: Report) -> None:
    statuses = {
        r["status"]: r["n"]
        for r in _rows(conn, "SELECT status, count(*) AS n FROM calendar.appointment GROUP BY status")
    }
    report.counts["appointments"] = statuses
    report.counts["appointments_due"] = _scalar(
        conn,
        "SELECT count(*) FROM calendar.appointment"
        " WHERE pending_expires_at < clock_timestamp() AND (status IN ('Pending', 'Expired'))",
    )
    report.counts["purchases"] = {
        r["status"]: r["n"] for r in _rows(conn, "SELECT status, count(*) AS n FROM promotion.purchase GROUP BY status")
    }
    overdue = _rows(
        conn,
        "SELECT id FROM calendar.appointment WHERE status = 'Pending' AND pending_expires_at < clock_timestamp()",
    )
    report.counts["appointments_pending_overdue"] = len(overdue)
    report.violation("appointments_pending_overdue", [r["id"] for r in overdue])
    late = _rows(conn, "SELECT id FROM promotion.purchase WHERE status = 'Active' AND ends_at < clock_timestamp()")
    report.counts["purchases_active_overdue"] = len(late)
    report.violation("purchases_active_overdue", [r["id"] for r in late])


def _check_appointment_events(
    tables: dict[str, list[dict[str, Any]]], by_topic: dict[str, list[Record]], report: Report
) -> None:
    appointments = {str(a["id"]): a for a in tables["appointment"]}
    cancelled = _by(by_topic[topics.APPOINTMENT_CANCELLED], "AppointmentId")
    created = _by(by_topic[topics.APPOINTMENT_CREATED], "AppointmentId")
    confirmed = _by(by_topic[topics.APPOINTMENT_CONFIRMED], "AppointmentId")
    payloads = _latest_by_message(by_topic[topics.APPOINTMENT_CANCELLED])
    created_payloads = _latest_by_message(by_topic[topics.APPOINTMENT_CREATED])

    terminal = [a for a in appointments.values() if a["status"] in TERMINAL]
    report.counts["terminal_appointments"] = len(terminal)
    report.counts["cancelled_message_ids_per_terminal"] = dict(
        Counter(len(cancelled.get(str(a["id"]), ())) for a in terminal)
    )
    report.violation("lost_cancelled_events", [a["id"] for a in terminal if not cancelled.get(str(a["id"]))])
    report.violation(
        "doubled_cancelled_events",
        [a["id"] for a in terminal if len(cancelled.get(str(a["id"]), ())) > 1],
        message_ids={
            str(a["id"]): sorted(cancelled[str(a["id"])]) for a in terminal if len(cancelled.get(str(a["id"]), ())) > 1
        },
    )
    wrong: list[str] = []
    for message_id, payload in payloads.items():
        row = appointments.get(str(payload["AppointmentId"]))
        if row is None or row["status"] not in TERMINAL:
            continue
        reason, by = expected_reason(row)
        rescheduled_to = row["rescheduled_to_appointment_id"]
        if (
            payload["Reason"] != reason
            or payload["CancelledBy"] != by
            or payload.get("RescheduledToAppointmentId") != (str(rescheduled_to) if rescheduled_to else None)
            or payload["TenantId"] != str(row["tenant_id"])
        ):
            wrong.append(message_id)
    report.violation("cancelled_reason_mismatch", wrong)
    report.violation(
        "phantom_cancelled_events",
        [i for i in cancelled if i not in appointments or appointments[i]["status"] not in TERMINAL],
    )
    report.violation("lost_created_events", [i for i in appointments if not created.get(i)])
    report.violation("doubled_created_events", [i for i in appointments if len(created.get(i, ())) > 1])
    report.violation("phantom_created_events", [i for i in created if i not in appointments])
    report.violation("doubled_confirmed_events", [i for i, ids in confirmed.items() if len(ids) > 1])
    report.violation("phantom_confirmed_events", [i for i in confirmed if i not in appointments])
    # a Confirmed appointment created Pending must have its confirmation on the topic
    created_pending = {str(p["AppointmentId"]) for p in created_payloads.values() if p["Status"] == "Pending"}
    report.violation(
        "lost_confirmed_events",
        [
            i
            for i, a in appointments.items()
            if a["status"] == "Confirmed" and i in created_pending and not confirmed.get(i)
        ],
    )
    # the calendar event: each (event, Version) at most one MessageId; a Cancelled event has its Cancelled message
    event_versions: dict[tuple[str, int], set[str]] = defaultdict(set)
    event_status: dict[str, set[str]] = defaultdict(set)
    for record in by_topic[topics.EVENT_STATUS_CHANGED]:
        payload = record.json()
        event_versions[(str(payload["CalendarEventId"]), int(payload["Version"]))].add(str(payload["MessageId"]))
        event_status[str(payload["CalendarEventId"])].add(str(payload["Status"]))
    report.violation(
        "doubled_event_status_versions", [f"{k[0]}@{k[1]}" for k, v in event_versions.items() if len(v) > 1]
    )
    report.violation(
        "lost_event_cancelled",
        [
            e["id"]
            for e in tables["calendar_event"]
            if e["status"] == "Cancelled" and "Cancelled" not in event_status.get(str(e["id"]), set())
        ],
    )


def _check_purchase_events(
    tables: dict[str, list[dict[str, Any]]], by_topic: dict[str, list[Record]], report: Report
) -> None:
    versions: dict[tuple[str, int], dict[str, dict[str, Any]]] = defaultdict(dict)
    for record in by_topic[topics.PURCHASE_CHANGED]:
        payload = record.json()
        versions[(str(payload["PurchaseId"]), int(payload["Version"]))][str(payload["MessageId"])] = payload
    lost, doubled, wrong = [], [], []
    for purchase in tables["purchase"]:
        pid = str(purchase["id"])
        for version in range(1, purchase["version"] + 1):
            messages = versions.get((pid, version), {})
            if not messages:
                lost.append(f"{pid}@{version}")
            elif len(messages) > 1:
                doubled.append(f"{pid}@{version}")
        last = versions.get((pid, purchase["version"]), {})
        if any(p["Status"] != purchase["status"] for p in last.values()):
            wrong.append(pid)
    known = {str(p["id"]) for p in tables["purchase"]}
    report.violation("lost_purchase_events", lost)
    report.violation("doubled_purchase_events", doubled)
    report.violation("purchase_status_mismatch", wrong)
    report.violation("phantom_purchase_events", sorted({k[0] for k in versions if k[0] not in known}))


def _check_plumbing(
    conn: psycopg.Connection[dict[str, Any]], by_topic: dict[str, list[Record]], report: Report
) -> None:
    outbox = _scalar(conn, "SELECT count(*) FROM outbox.message")
    dead = _rows(conn, "SELECT message_id, topic, error FROM outbox.dead_letter")
    poison = _rows(conn, "SELECT job, item_id, attempts, last_error FROM jobs.item_failure")
    report.counts["outbox_rows"] = outbox
    report.counts["outbox_dead_letters"] = len(dead)
    report.counts["job_item_failures"] = len(poison)
    report.violation("outbox_not_empty", list(range(outbox)))
    report.violation("outbox_dead_letters", [d["message_id"] for d in dead], errors=[d["error"] for d in dead[:5]])
    report.violation("job_poison_items", [p["item_id"] for p in poison], errors=[p["last_error"] for p in poison[:5]])
    for group in topics.CONSUMER_GROUPS:
        letters = by_topic.get(topics.dead_letter_topic(group), [])
        report.violation(f"consumer_dead_letters_{group}", [r.headers.get("message-id", r.offset) for r in letters])


def _check_inboxes(tables: dict[str, list[dict[str, Any]]], by_topic: dict[str, list[Record]], report: Report) -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    for row in tables["inbox"]:
        seen[row["consumer_group"]].add(str(row["message_id"]))
    report.counts["inbox"] = {}
    for group in topics.CONSUMER_GROUPS:
        wanted = {str(r.json()["MessageId"]) for t in routes_of(group) for r in by_topic.get(t, [])}
        report.counts["inbox"][group] = {"messages": len(wanted), "processed": len(seen[group] & wanted)}
        report.violation(f"not_processed_{group}", sorted(wanted - seen[group]))
        report.violation(f"inbox_unknown_message_{group}", sorted(seen[group] - wanted))


def _check_crm(tables: dict[str, list[dict[str, Any]]], report: Report) -> None:
    entries: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in tables["lead_feed_entry"]:
        entries[str(entry["appointment_id"])].append(entry)
    missing, doubled, wrong, extra = [], [], [], []
    appointments = {str(a["id"]): a for a in tables["appointment"]}
    for aid, row in appointments.items():
        mine = entries.get(aid, [])
        if row["status"] not in TERMINAL:
            if mine:
                extra.append(aid)
            continue
        if not mine:
            missing.append(aid)
            continue
        if len(mine) > 1:
            doubled.append(aid)
        reason, _ = expected_reason(row)
        to = row["rescheduled_to_appointment_id"]
        kind = "Rescheduled" if to is not None else reason
        entry = mine[0]
        if entry["entry_kind"] != kind or entry["reason"] != reason or entry["rescheduled_to_appointment_id"] != to:
            wrong.append(aid)
    report.counts["crm_feed_entries"] = len(tables["lead_feed_entry"])
    report.violation("crm_missing_feed_entries", missing)
    report.violation("crm_doubled_feed_entries", doubled)
    report.violation("crm_wrong_feed_entries", wrong)
    report.violation("crm_feed_entries_of_live_appointments", extra)
    report.violation("crm_feed_entries_of_unknown_appointments", [a for a in entries if a not in appointments])


def _check_notifications(
    tables: dict[str, list[dict[str, Any]]], by_topic: dict[str, list[Record]], report: Report
) -> None:
    appointments = {str(a["id"]): a for a in tables["appointment"]}
    required: set[tuple[str, str, str]] = set()  # (subject, kind, recipient)
    allowed: set[tuple[str, str, str]] = set()
    for p in _latest_by_message(by_topic[topics.APPOINTMENT_CANCELLED]).values():
        rescheduled = p.get("RescheduledToAppointmentId") is not None
        for who in cancellation_recipients(p["Reason"], rescheduled, p["AgentUserId"], p["InvestorUserId"]):
            required.add((p["AppointmentId"], "AppointmentCancelled", who))
    for p in _latest_by_message(by_topic[topics.APPOINTMENT_CREATED]).values():
        required.add((p["AppointmentId"], "AppointmentCreated", p["AgentUserId"]))
        if p.get("RescheduledFromAppointmentId") is not None:  # a reschedule's new half tells the investor too
            required.add((p["AppointmentId"], "AppointmentCreated", p["InvestorUserId"]))
    for p in _latest_by_message(by_topic[topics.APPOINTMENT_CONFIRMED]).values():
        key = (p["AppointmentId"], "AppointmentConfirmed", p["InvestorUserId"])
        row = appointments.get(p["AppointmentId"])
        # a confirmation handled after the terminal event is a no-op (seed 003): required only while live
        (required if row is not None and row["status"] == "Confirmed" else allowed).add(key)
    for p in _latest_by_message(by_topic[topics.PURCHASE_CHANGED]).values():
        if p["Status"] == "Expired" and p.get("BuyerUserId"):
            required.add((p["PurchaseId"], "PromotionExpired", p["BuyerUserId"]))
    actual = Counter((str(n["subject_id"]), n["kind"], str(n["recipient_user_id"])) for n in tables["notification"])
    per_message = Counter((str(n["message_id"]), str(n["recipient_user_id"])) for n in tables["notification"])
    report.counts["notifications"] = {"rows": len(tables["notification"]), "required": len(required)}
    report.violation("notifications_missing", sorted("|".join(k) for k in required - set(actual)))
    report.violation("notifications_doubled", sorted("|".join(k) for k, n in actual.items() if n > 1))
    report.violation("notifications_doubled_per_message", sorted("|".join(k) for k, n in per_message.items() if n > 1))
    report.violation("notifications_unexpected", sorted("|".join(k) for k in set(actual) - required - allowed))


def _check_contributions(tables: dict[str, list[dict[str, Any]]], report: Report) -> None:
    purchases = {str(p["id"]): p for p in tables["purchase"]}
    catalog = {
        (str(c["purchase_id"]), c["target_kind"], str(c["target_id"])): c for c in tables["catalog_contribution"]
    }
    news = {(str(c["purchase_id"]), "Post", str(c["post_id"])): c for c in tables["news_contribution"]}
    missing, wrong = [], []
    for target in tables["purchase_target"]:
        key = (str(target["purchase_id"]), target["target_kind"], str(target["target_id"]))
        purchase = purchases[key[0]]
        contribution = (news if target["target_kind"] == "Post" else catalog).get(key)
        if contribution is None:
            missing.append("|".join(key))
            continue
        if (
            contribution["active"] != (purchase["status"] == "Active")
            or contribution["boost_weight"] != purchase["boost_weight"]
            or contribution["purchase_version"] != purchase["version"]
        ):
            wrong.append("|".join(key))
    targets = {(str(t["purchase_id"]), t["target_kind"], str(t["target_id"])) for t in tables["purchase_target"]}
    report.counts["boost_contributions"] = {"catalog": len(catalog), "news": len(news), "targets": len(targets)}
    report.violation("boost_contributions_missing", missing)
    report.violation("boost_contributions_stale", wrong)
    report.violation("boost_contributions_unknown", sorted("|".join(k) for k in (set(catalog) | set(news)) - targets))


def _check_boosts(
    conn: psycopg.Connection[dict[str, Any]], tables: dict[str, list[dict[str, Any]]], report: Report
) -> None:
    active = {str(p["id"]): p for p in tables["purchase"] if p["status"] == "Active"}
    expected: Counter[tuple[str, str, str]] = Counter()  # (tenant, kind, id) -> sum of Active BoostWeight
    for target in tables["purchase_target"]:
        purchase = active.get(str(target["purchase_id"]))
        if purchase is not None:
            expected[(str(purchase["tenant_id"]), target["target_kind"], str(target["target_id"]))] += purchase[
                "boost_weight"
            ]
    wrong = []
    for card in tables["card"]:
        want = expected[(str(card["tenant_id"]), card["kind"], str(card["id"]))]
        if card["kind"] == "PropertyObject" and card["published"] and card["project_id"] is not None:
            want += expected[(str(card["tenant_id"]), "Project", str(card["project_id"]))]
        got = card_with_boost(conn, kind=CardKind(card["kind"]), card_id=card["id"], tenant_id=card["tenant_id"])
        if got is None or got["promotionBoost"] != want:
            wrong.append(f"{card['kind']}:{card['id']} got {got and got['promotionBoost']} want {want}")
    for post in tables["post"]:
        want = expected[(str(post["tenant_id"]), "Post", str(post["id"]))]
        got = post_with_boost(conn, post_id=post["id"], tenant_id=post["tenant_id"])
        if got is None or got["promotionBoost"] != want:
            wrong.append(f"Post:{post['id']} got {got and got['promotionBoost']} want {want}")
    report.counts["boosted_targets_now"] = sum(1 for v in expected.values() if v)
    report.counts["cards"] = len(tables["card"])
    report.counts["posts"] = len(tables["post"])
    report.violation("boost_not_sum_of_active_purchases", wrong)


def _check_slots(tables: dict[str, list[dict[str, Any]]], report: Report) -> None:
    active = Counter(str(a["slot_id"]) for a in tables["appointment"] if a["status"] in ACTIVE)
    report.violation("slots_with_two_active_appointments", [s for s, n in active.items() if n > 1])
    wrong = [
        f"{s['id']} {s['status']} active={active.get(str(s['id']), 0)}"
        for s in tables["slot"]
        if (s["status"] == "Booked") != (active.get(str(s["id"]), 0) == 1) and s["status"] != "Expired"
    ]
    report.counts["slots"] = dict(Counter(s["status"] for s in tables["slot"]))
    report.violation("slot_status_inconsistent", wrong)


def _check_acks(tables: dict[str, list[dict[str, Any]]], history: History, report: Report) -> None:
    appointments = {str(a["id"]): a for a in tables["appointment"]}
    purchases = {str(p["id"]): p for p in tables["purchase"]}
    lost, undone = [], []
    for aid, acked in history.appointment_acks.items():
        row = appointments.get(aid)
        if row is None:
            lost.append(aid)
            continue
        final = row["status"]
        terminal_acks = [s for s in acked if s in TERMINAL]
        if terminal_acks and final != terminal_acks[-1]:
            undone.append(f"{aid} acked {acked} final {final}")
        if "Confirmed" in acked and final in ("Expired", "Declined"):
            undone.append(f"{aid} acked {acked} final {final}")
    for pid, acked in history.purchase_acks.items():
        row = purchases.get(pid)
        if row is None:
            lost.append(pid)
        elif "Cancelled" in acked and row["status"] != "Cancelled":
            undone.append(f"{pid} acked {acked} final {row['status']}")
    cards = {f"{c['kind']}:{c['id']}": str(c["tenant_id"]) for c in tables["card"]}
    cards.update({f"Post:{p['id']}": str(p["tenant_id"]) for p in tables["post"]})
    lost += [k for k, tenant in history.target_acks.items() if cards.get(k) != tenant]
    report.counts["acknowledged"] = {
        "appointments": len(history.appointment_acks),
        "purchases": len(history.purchase_acks),
        "targets": len(history.target_acks),
    }
    report.violation("acknowledged_writes_lost", lost)
    report.violation("acknowledged_transitions_undone", undone)


def new_id() -> str:
    """A fresh id (for evidence folder names)."""
    return uuid.uuid4().hex[:8]
