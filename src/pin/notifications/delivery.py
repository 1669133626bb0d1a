"""The delivery port of notifications and its database-backed channel.

A real channel (push, e-mail) can be plugged in later behind :class:`NotificationDelivery`; it receives the
connection of the consumer's transaction so that a channel which records before sending stays exactly-once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from functools import cache
from typing import NamedTuple, Protocol

from pin.db import Conn, load_queries
from pin.notifications.domain import Notice


class Notification(NamedTuple):  # a named tuple: immutable, and cheap to build for each notification of a batch
    """A rendered notification for one recipient in one tenant."""

    tenant_id: uuid.UUID
    subject_id: uuid.UUID
    message_id: uuid.UUID
    notice: Notice


# Asked once the transaction's results are in: per notification delivered, in order, False for one already delivered
# (same subject, template, recipient: before, or earlier in the same call). The statements of a batch go in one
# pipeline, so the answer is read after they were all sent.
Delivered = Callable[[], list[bool]]


class NotificationDelivery(Protocol):
    """Delivers notifications; the answer says whether each was new."""

    def deliver(self, conn: Conn, notifications: Sequence[Notification]) -> Delivered:
        """Deliver within the caller's transaction, in order."""


_QUERIES = load_queries(__package__)
_INSERT = _QUERIES["notification_insert"]

_Once = tuple[uuid.UUID, str, uuid.UUID]


def _once(notification: Notification) -> _Once:
    """The key of ``notification_once``: one notification per subject, template and recipient."""
    return notification.subject_id, notification.notice.template_key, notification.notice.recipient_user_id


class DatabaseDelivery:
    """Stores notifications in ``notifications.notification``, read by GET /notifications."""

    def deliver(self, conn: Conn, notifications: Sequence[Notification]) -> Delivered:
        """Insert the notifications (one statement) but those already notified to their recipient."""
        keys = [_once(notification) for notification in notifications]
        first: dict[_Once, int] = {}
        for index, key in enumerate(keys):
            first.setdefault(key, index)  # a repeat within the call is not new, as one after another
        if not first:
            return lambda: []
        rows = [notifications[index] for index in first.values()]
        cursor = conn.execute(
            _INSERT,
            ([n.tenant_id for n in rows], [n.notice.recipient_user_id for n in rows],
             [n.notice.kind.value for n in rows], [n.notice.template_key for n in rows], [n.notice.text for n in rows],
             [n.subject_id for n in rows], [n.message_id for n in rows]),
        )  # fmt: skip

        @cache
        def delivered() -> list[bool]:
            if cursor.rowcount == len(rows):  # all new (the usual case): the returned rows need not be converted
                return [first[key] == i for i, key in enumerate(keys)]
            inserted = {(r["subject_id"], r["template_key"], r["recipient_user_id"]) for r in cursor.fetchall()}
            return [first[key] == i and key in inserted for i, key in enumerate(keys)]

        return delivered
