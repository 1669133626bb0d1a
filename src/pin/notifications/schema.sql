-- notifications context schema (owned by the notifications context)
CREATE SCHEMA IF NOT EXISTS notifications;

-- One row per notification to one recipient (the database-backed delivery channel). The business key
-- (subject, template, recipient) makes a second, different message about the same outcome add nothing.
CREATE TABLE IF NOT EXISTS notifications.notification (
    id                uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id         uuid        NOT NULL,
    recipient_user_id uuid        NOT NULL,
    -- NotificationKind: AppointmentCancelled | AppointmentConfirmed | AppointmentCreated | PromotionExpired
    kind              text        NOT NULL,
    template_key      text        NOT NULL,
    text              text        NOT NULL,
    -- the appointment or purchase the notification is about
    subject_id        uuid        NOT NULL,
    message_id        uuid        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT notification_once UNIQUE (subject_id, template_key, recipient_user_id)
);

CREATE INDEX IF NOT EXISTS notification_by_recipient
    ON notifications.notification (tenant_id, recipient_user_id, created_at DESC, id);

-- What notifications knows of an appointment: enough to ignore an appointment-confirmed that arrives after the
-- terminal event (seed 003: stale confirmations are a no-op with a warning). The row lock serializes the two.
CREATE TABLE IF NOT EXISTS notifications.appointment_state (
    appointment_id uuid        PRIMARY KEY,
    tenant_id      uuid        NOT NULL,
    status         text        NOT NULL CHECK (status IN ('Confirmed', 'Terminal')),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
