-- The calendar's schema changes after its schema.sql (applied by the initial migration), one pair per revision of
-- src/pin/migrations/versions/. Each starts with a "-- name --" line and a one-line description.

-- 0005_upgrade --
-- The rest of the appointment-timeout cascade vacuumed by a fixed number of dead rows.
-- Every expiry rewrites, beside its appointment (tuned in schema.sql), its slot, its calendar event and the event's
-- reminders: at 100 expiries a second, 400 dead versions a second across these three tables, which the default
-- 20 % of a table of months of appointments would let pile up into millions before a vacuum. The cascade reads
-- each by primary key, so the dead versions cost the lookups little, but the tables and their indexes grow: vacuum
-- after 2,000 dead rows each.
ALTER TABLE calendar.availability_slot SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE calendar.calendar_event SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE calendar.event_reminder SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);

-- 0005_downgrade --
-- The cascade's tables back on the server's autovacuum settings.
ALTER TABLE calendar.availability_slot RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay
);
ALTER TABLE calendar.calendar_event RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay
);
ALTER TABLE calendar.event_reminder RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay
);
