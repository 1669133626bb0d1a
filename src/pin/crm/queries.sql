-- crm's statements: the lead feed's writes (handler.py) and its read (queries.py).
-- Each statement starts with a "-- name --" line and its description; loaded by pin.db.load_queries.

-- lead_feed_insert_terminal --
-- A terminal appointment has one entry: a second, different message about it adds nothing.
INSERT INTO crm.lead_feed_entry
    (tenant_id, investor_user_id, agent_user_id, appointment_id, entry_kind, reason, cancelled_by, text,
     appointment_kind, start_at, time_zone, message_id, occurred_at)
SELECT m.tenant_id, m.investor_user_id, m.agent_user_id, m.appointment_id, m.entry_kind, m.reason, m.cancelled_by,
       m.text, m.appointment_kind, m.start_at, m.time_zone, m.message_id, COALESCE(m.occurred_at, now())
FROM unnest(%b::uuid[], %b::uuid[], %b::uuid[], %b::uuid[], %b::text[], %b::text[], %b::text[], %b::text[],
            %b::text[], %b::timestamptz[], %b::text[], %b::uuid[], %b::timestamptz[])
     AS m(tenant_id, investor_user_id, agent_user_id, appointment_id, entry_kind, reason, cancelled_by, text,
          appointment_kind, start_at, time_zone, message_id, occurred_at)
ON CONFLICT (appointment_id) DO NOTHING
RETURNING appointment_id

-- lead_feed_upsert_reschedule_from_cancelled --
-- The cancellation half of a reschedule: creates the entry, or completes the one its appointment-created made.
INSERT INTO crm.lead_feed_entry AS e
    (tenant_id, investor_user_id, agent_user_id, appointment_id, entry_kind, reason, cancelled_by, text,
     appointment_kind, start_at, time_zone, rescheduled_to_appointment_id, message_id, occurred_at)
SELECT m.tenant_id, m.investor_user_id, m.agent_user_id, m.appointment_id, 'Rescheduled', m.reason, m.cancelled_by,
       m.text, m.appointment_kind, m.start_at, m.time_zone, m.rescheduled_to_appointment_id, m.message_id,
       COALESCE(m.occurred_at, now())
FROM unnest(%b::uuid[], %b::uuid[], %b::uuid[], %b::uuid[], %b::text[], %b::text[], %b::text[], %b::text[],
            %b::timestamptz[], %b::text[], %b::uuid[], %b::uuid[], %b::timestamptz[])
     AS m(tenant_id, investor_user_id, agent_user_id, appointment_id, reason, cancelled_by, text, appointment_kind,
          start_at, time_zone, rescheduled_to_appointment_id, message_id, occurred_at)
ON CONFLICT (appointment_id) DO UPDATE
SET reason = EXCLUDED.reason,
    cancelled_by = EXCLUDED.cancelled_by,
    agent_user_id = EXCLUDED.agent_user_id,
    appointment_kind = EXCLUDED.appointment_kind,
    start_at = EXCLUDED.start_at,
    time_zone = EXCLUDED.time_zone,
    occurred_at = LEAST(e.occurred_at, EXCLUDED.occurred_at)
WHERE e.entry_kind = 'Rescheduled' AND e.reason IS NULL

-- lead_feed_upsert_reschedule_from_created --
-- The creation half of a reschedule (RescheduledFromAppointmentId): the entry lives under the old appointment.
INSERT INTO crm.lead_feed_entry AS e
    (tenant_id, investor_user_id, agent_user_id, appointment_id, entry_kind, text,
     rescheduled_to_appointment_id, rescheduled_start_at, message_id, occurred_at)
SELECT m.tenant_id, m.investor_user_id, m.agent_user_id, m.appointment_id, 'Rescheduled', m.text,
       m.rescheduled_to_appointment_id, m.rescheduled_start_at, m.message_id, COALESCE(m.occurred_at, now())
FROM unnest(%b::uuid[], %b::uuid[], %b::uuid[], %b::uuid[], %b::text[], %b::uuid[], %b::timestamptz[], %b::uuid[],
            %b::timestamptz[])
     AS m(tenant_id, investor_user_id, agent_user_id, appointment_id, text, rescheduled_to_appointment_id,
          rescheduled_start_at, message_id, occurred_at)
ON CONFLICT (appointment_id) DO UPDATE
SET rescheduled_start_at = EXCLUDED.rescheduled_start_at
WHERE e.entry_kind = 'Rescheduled' AND e.rescheduled_start_at IS NULL

-- lead_feed_of_investor --
-- The newest entries of one lead (an investor) in one tenant (GET /leads/{investorUserId}/feed).
SELECT id, appointment_id, entry_kind, reason, cancelled_by, text, appointment_kind, start_at, time_zone,
       rescheduled_to_appointment_id, rescheduled_start_at, occurred_at, recorded_at
FROM crm.lead_feed_entry
WHERE tenant_id = %s AND investor_user_id = %s
ORDER BY occurred_at DESC, id
LIMIT %s
