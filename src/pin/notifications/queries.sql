-- notifications' statements: the appointments' state (handler.py), delivery (delivery.py), the read (queries.py).
-- Each statement starts with a "-- name --" line and its description; loaded by pin.db.load_queries.

-- appointment_state_mark_terminal --
-- The terminal outcome wins: once Terminal, an appointment never goes back to Confirmed here. One row per
-- appointment of a batch (a statement cannot update a row twice); a new row takes the first message's tenant.
INSERT INTO notifications.appointment_state (appointment_id, tenant_id, status)
SELECT m.appointment_id, m.tenant_id, 'Terminal' FROM unnest(%b::uuid[], %b::uuid[]) AS m(appointment_id, tenant_id)
ON CONFLICT (appointment_id) DO UPDATE SET status = 'Terminal', updated_at = now()

-- appointment_state_mark_confirmed --
-- Confirmed, unless the appointment is already Terminal; returns the state each appointment is in now.
INSERT INTO notifications.appointment_state AS s (appointment_id, tenant_id, status)
SELECT m.appointment_id, m.tenant_id, 'Confirmed' FROM unnest(%b::uuid[], %b::uuid[]) AS m(appointment_id, tenant_id)
ON CONFLICT (appointment_id) DO UPDATE SET updated_at = now()
RETURNING s.appointment_id, s.status

-- notification_insert --
-- Notifications, once per subject, template and recipient (notification_once); returns the new ones.
INSERT INTO notifications.notification
    (tenant_id, recipient_user_id, kind, template_key, text, subject_id, message_id)
SELECT * FROM unnest(%b::uuid[], %b::uuid[], %b::text[], %b::text[], %b::text[], %b::uuid[], %b::uuid[])
ON CONFLICT ON CONSTRAINT notification_once DO NOTHING
RETURNING subject_id, template_key, recipient_user_id

-- notifications_of_user --
-- The newest notifications of one user in one tenant (GET /notifications).
SELECT id, kind, template_key, text, subject_id, created_at
FROM notifications.notification
WHERE tenant_id = %s AND recipient_user_id = %s
ORDER BY created_at DESC, id
LIMIT %s
