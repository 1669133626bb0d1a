"""The delivery port of notifications and its database-backed channel.

A real channel (push, e-mail) can be plugged in later behind :class:`NotificationDelivery`; it receives the
connection of the consumer's transaction so that a channel which records before sending stays exactly-once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pin.db import Conn
from pin.notifications.domain import Notice


@dataclass(frozen=True)
class Notification:
    """A rendered notification for one recipient in one tenant."""

    tenant_id: uuid.UUID
    subject_id: uuid.UUID
    message_id: uuid.UUID
    notice: Notice


# Asked once the transaction's results are in: False for a notification already delivered (same subject, template,
# recipient). A batch's statements go in one pipeline, so the answer is read after they were all sent.
Delivered = Callable[[], bool]


class NotificationDelivery(Protocol):
    """Delivers notifications; the answer says whether each was new."""

    def deliver(self, conn: Conn, notification: Notification) -> Delivered:
        """Deliver within the caller's transaction."""


_INSERT = """
INSERT INTO notifications.notification
    (tenant_id, recipient_user_id, kind, template_key, text, subject_id, message_id)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT ON CONSTRAINT notification_once DO NOTHING
"""


class DatabaseDelivery:
    """Stores notifications in ``notifications.notification``, read by GET /notifications."""

    def deliver(self, conn: Conn, notification: Notification) -> Delivered:
        """Insert the notification unless this outcome was already notified to this recipient."""
        notice = notification.notice
        cursor = conn.execute(
            _INSERT,
            (notification.tenant_id, notice.recipient_user_id, notice.kind.value, notice.template_key, notice.text,
             notification.subject_id, notification.message_id),
        )  # fmt: skip
        return lambda: cursor.rowcount == 1
