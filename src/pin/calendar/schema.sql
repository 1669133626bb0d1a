-- calendar context schema (owned by the calendar context; SPEC section 2).
-- State machines live twice: as enums with allowed transitions in pin/calendar/domain.py, and here as a
-- CHECK on the status plus a trigger that refuses any status change the state machine does not allow.
CREATE SCHEMA IF NOT EXISTS calendar;

-- One trigger function for every table: TG_ARGV lists the allowed changes as 'From>To'.
CREATE FUNCTION calendar.enforce_status_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status
       AND NOT ((OLD.status || '>' || NEW.status) = ANY (TG_ARGV)) THEN
        RAISE EXCEPTION 'calendar: % may not go from % to %', TG_TABLE_NAME, OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_' || TG_TABLE_NAME || '_status_transition';
    END IF;
    RETURN NEW;
END;
$$;

-- A changed aggregate row moves its Version by exactly one (optimistic concurrency: ETag = Version).
CREATE FUNCTION calendar.enforce_version_step() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.version IS DISTINCT FROM OLD.version + 1 THEN
        RAISE EXCEPTION 'calendar: % version must go from % to %', TG_TABLE_NAME, OLD.version, OLD.version + 1
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_' || TG_TABLE_NAME || '_version_step';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TABLE calendar.availability_slot (
    id                    uuid        PRIMARY KEY,
    tenant_id             uuid        NOT NULL,
    agent_user_id         uuid        NOT NULL,
    kind                  text        NOT NULL CONSTRAINT ck_slot_kind CHECK (kind IN ('Showing', 'Consultation')),
    start_at              timestamptz NOT NULL,
    end_at                timestamptz NOT NULL,
    time_zone             text        NOT NULL,                 -- IANA name, checked by the domain
    min_lead_time_minutes integer     NOT NULL CONSTRAINT ck_slot_min_lead_time CHECK (min_lead_time_minutes >= 0),
    auto_confirm          boolean     NOT NULL,
    status                text        NOT NULL
        CONSTRAINT ck_slot_status CHECK (status IN ('Available', 'Booked', 'Expired')),
    version               integer     NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    CONSTRAINT ck_slot_end_after_start CHECK (end_at > start_at)
);
CREATE INDEX ix_slot_tenant_agent_start ON calendar.availability_slot (tenant_id, agent_user_id, start_at);

CREATE TRIGGER tr_slot_status_transition BEFORE UPDATE OF status ON calendar.availability_slot
    FOR EACH ROW EXECUTE FUNCTION calendar.enforce_status_transition(
        'Available>Booked', 'Booked>Available', 'Booked>Expired');
CREATE TRIGGER tr_slot_version_step BEFORE UPDATE ON calendar.availability_slot
    FOR EACH ROW EXECUTE FUNCTION calendar.enforce_version_step();

CREATE TABLE calendar.appointment (
    id                               uuid        PRIMARY KEY,
    tenant_id                        uuid        NOT NULL,
    slot_id                          uuid        NOT NULL REFERENCES calendar.availability_slot (id),
    agent_user_id                    uuid        NOT NULL,
    investor_user_id                 uuid        NOT NULL,
    kind                             text        NOT NULL
        CONSTRAINT ck_appointment_kind CHECK (kind IN ('Showing', 'Consultation')),
    start_at                         timestamptz NOT NULL,   -- snapshot of the slot
    end_at                           timestamptz NOT NULL,
    time_zone                        text        NOT NULL,
    status                           text        NOT NULL
        CONSTRAINT ck_appointment_status
        CHECK (status IN ('Pending', 'Confirmed', 'Declined', 'Cancelled', 'Expired', 'Completed')),
    pending_expires_at               timestamptz,            -- null when created Confirmed (AutoConfirm)
    calendar_event_id                uuid        NOT NULL,   -- FK added below (the event points back)
    cancelled_by                     text
        CONSTRAINT ck_appointment_cancelled_by CHECK (cancelled_by IN ('Investor', 'Agent', 'System')),
    cancel_reason                    text,                   -- free text; never leaves calendar
    rescheduled_to_appointment_id    uuid        REFERENCES calendar.appointment (id),
    rescheduled_from_appointment_id  uuid        REFERENCES calendar.appointment (id),
    version                          integer     NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at                       timestamptz NOT NULL,
    updated_at                       timestamptz NOT NULL,
    CONSTRAINT ck_appointment_end_after_start CHECK (end_at > start_at),
    CONSTRAINT ck_appointment_pending_has_expiry CHECK (status <> 'Pending' OR pending_expires_at IS NOT NULL),
    CONSTRAINT ck_appointment_cancelled_has_actor CHECK (status <> 'Cancelled' OR cancelled_by IS NOT NULL),
    -- Declined and Expired are not cancellations: the actor is implied by the Reason (seed 003)
    CONSTRAINT ck_appointment_declined_expired_no_actor
        CHECK (status NOT IN ('Declined', 'Expired') OR cancelled_by IS NULL),
    CONSTRAINT ck_appointment_active_no_actor
        CHECK (status NOT IN ('Pending', 'Confirmed') OR cancelled_by IS NULL),
    CONSTRAINT ck_appointment_rescheduled_is_cancelled
        CHECK (rescheduled_to_appointment_id IS NULL OR status = 'Cancelled')
) WITH (
    -- Pending -> anything else cannot be a HOT update (the partial indexes' predicate changes): every ending
    -- leaves a dead entry at the head of ix_appointments_pending_expires_at, which the worker scans first.
    -- Vacuum by a small fixed number of dead rows, not by a fraction of the table (docs/design/claims.md).
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 200,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- At most one Pending or Confirmed appointment per slot (INV-SLT-3), in the database too.
CREATE UNIQUE INDEX ux_appointment_active_per_slot ON calendar.appointment (slot_id)
    WHERE status IN ('Pending', 'Confirmed');
-- The appointment-timeout worker's claim index (seed 000): Pending, oldest PendingExpiresAt first.
CREATE INDEX ix_appointments_pending_expires_at ON calendar.appointment (pending_expires_at, id)
    WHERE status = 'Pending';
CREATE INDEX ix_appointment_tenant_investor ON calendar.appointment (tenant_id, investor_user_id);
CREATE INDEX ix_appointment_tenant_agent ON calendar.appointment (tenant_id, agent_user_id);

CREATE TRIGGER tr_appointment_status_transition BEFORE UPDATE OF status ON calendar.appointment
    FOR EACH ROW EXECUTE FUNCTION calendar.enforce_status_transition(
        'Pending>Confirmed', 'Pending>Declined', 'Pending>Cancelled', 'Pending>Expired',
        'Confirmed>Cancelled', 'Confirmed>Completed');
CREATE TRIGGER tr_appointment_version_step BEFORE UPDATE ON calendar.appointment
    FOR EACH ROW EXECUTE FUNCTION calendar.enforce_version_step();

CREATE TABLE calendar.calendar_event (
    id             uuid        PRIMARY KEY,
    tenant_id      uuid        NOT NULL,
    owner_user_id  uuid        NOT NULL,                     -- the agent
    origin         text        NOT NULL CONSTRAINT ck_event_origin CHECK (origin IN ('Appointment', 'Manual')),
    appointment_id uuid        REFERENCES calendar.appointment (id),
    start_at       timestamptz NOT NULL,
    end_at         timestamptz NOT NULL,
    time_zone      text        NOT NULL,
    status         text        NOT NULL CONSTRAINT ck_event_status CHECK (status IN ('Scheduled', 'Cancelled')),
    cancel_reason  text,                                     -- free text; never leaves calendar
    version        integer     NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    CONSTRAINT ck_event_end_after_start CHECK (end_at > start_at),
    CONSTRAINT ck_event_origin_appointment CHECK ((origin = 'Appointment') = (appointment_id IS NOT NULL)),
    CONSTRAINT ck_event_cancelled_has_reason CHECK (status <> 'Cancelled' OR cancel_reason IS NOT NULL)
);
CREATE UNIQUE INDEX ux_event_appointment ON calendar.calendar_event (appointment_id) WHERE appointment_id IS NOT NULL;

-- The appointment and its event point at each other; the check waits for the commit so either goes first.
ALTER TABLE calendar.appointment ADD CONSTRAINT fk_appointment_calendar_event
    FOREIGN KEY (calendar_event_id) REFERENCES calendar.calendar_event (id) DEFERRABLE INITIALLY DEFERRED;

CREATE TRIGGER tr_event_status_transition BEFORE UPDATE OF status ON calendar.calendar_event
    FOR EACH ROW EXECUTE FUNCTION calendar.enforce_status_transition('Scheduled>Cancelled');
CREATE TRIGGER tr_event_version_step BEFORE UPDATE ON calendar.calendar_event
    FOR EACH ROW EXECUTE FUNCTION calendar.enforce_version_step();

-- Reminders are part of the CalendarEvent aggregate: the event's Version covers them.
CREATE TABLE calendar.event_reminder (
    id                uuid        PRIMARY KEY,
    calendar_event_id uuid        NOT NULL REFERENCES calendar.calendar_event (id),
    remind_at         timestamptz NOT NULL,
    status            text        NOT NULL
        CONSTRAINT ck_reminder_status CHECK (status IN ('Pending', 'Sent', 'Skipped')),
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
CREATE INDEX ix_reminder_event ON calendar.event_reminder (calendar_event_id, remind_at);

CREATE TRIGGER tr_reminder_status_transition BEFORE UPDATE OF status ON calendar.event_reminder
    FOR EACH ROW EXECUTE FUNCTION calendar.enforce_status_transition('Pending>Sent', 'Pending>Skipped');
