-- crm context schema (owned by the crm context)
CREATE SCHEMA IF NOT EXISTS crm;

-- The lead feed: one entry per terminal appointment (seed 003, «Потребители»: MessageId is the entry's unique key,
-- AppointmentId its business key). A reschedule is one entry under the old appointment, linked to the new one,
-- filled by appointment-cancelled (old) and appointment-created (new) in whichever order they arrive.
CREATE TABLE IF NOT EXISTS crm.lead_feed_entry (
    id                            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id                     uuid        NOT NULL,
    investor_user_id              uuid        NOT NULL,
    agent_user_id                 uuid        NOT NULL,
    appointment_id                uuid        NOT NULL UNIQUE,
    -- DeclinedByAgent | CancelledByInvestor | CancelledByAgent | Expired | Cancelled (unknown Reason) | Rescheduled
    entry_kind                    text        NOT NULL,
    -- Reason exactly as received (an unknown value is kept); null until the cancellation of a reschedule arrives
    reason                        text,
    -- CancelledBy exactly as received (an unknown value is kept, seed 003); null for Declined and Expired
    cancelled_by                  text,
    text                          text        NOT NULL,
    -- Kind exactly as received (an unknown value is kept, seed 003)
    appointment_kind              text,
    start_at                      timestamptz,
    time_zone                     text,
    rescheduled_to_appointment_id uuid,
    rescheduled_start_at          timestamptz,
    message_id                    uuid        NOT NULL UNIQUE,
    occurred_at                   timestamptz NOT NULL,
    recorded_at                   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT lead_feed_entry_kind CHECK (entry_kind IN
        ('DeclinedByAgent', 'CancelledByInvestor', 'CancelledByAgent', 'Expired', 'Cancelled', 'Rescheduled')),
    CONSTRAINT lead_feed_entry_reschedule_link CHECK
        ((entry_kind = 'Rescheduled') = (rescheduled_to_appointment_id IS NOT NULL))
);

CREATE INDEX IF NOT EXISTS lead_feed_entry_by_lead
    ON crm.lead_feed_entry (tenant_id, investor_user_id, occurred_at DESC, id);
