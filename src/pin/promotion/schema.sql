-- promotion context schema (owned by the promotion context): packages on offer, purchases and their targets.
CREATE SCHEMA IF NOT EXISTS promotion;

-- Reference data (SPEC section 3): what a manager can activate. A purchase copies what it needs at activation,
-- so a later change of a package never rewrites a purchase or its events.
CREATE TABLE promotion.package (
    id              uuid          PRIMARY KEY,                                  -- PackageId
    code            text          NOT NULL UNIQUE,                              -- PackageCode
    kind            text          NOT NULL CHECK (kind IN ('Standard', 'Premium', 'Top')),  -- PackageKind
    boost_weight    integer       NOT NULL CHECK (boost_weight > 0),            -- BoostWeight a target receives
    duration        interval      NOT NULL CHECK (duration > interval '0'),     -- EndsAt = StartsAt + Duration
    price_amount    numeric(12,2) NOT NULL CHECK (price_amount >= 0),
    currency_id     uuid          NOT NULL,
    currency_code   text          NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'), -- ISO 4217
    currency_symbol text          NOT NULL,
    on_offer        boolean       NOT NULL DEFAULT true                         -- withdrawn packages stay for history
);

-- Fixed ids: demo data, tests and operators refer to them.
INSERT INTO promotion.package
    (id, code, kind, boost_weight, duration, price_amount, currency_id, currency_code, currency_symbol)
VALUES
    ('6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0001', 'STANDARD-7D', 'Standard', 10, interval '7 days', 1500.00,
     '3a7f0c52-5b1e-4d0e-8a1c-00000000a643', 'RUB', '₽'),
    ('6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0002', 'PREMIUM-14D', 'Premium', 25, interval '14 days', 3500.00,
     '3a7f0c52-5b1e-4d0e-8a1c-00000000a643', 'RUB', '₽'),
    ('6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0003', 'TOP-30D', 'Top', 50, interval '30 days', 9000.00,
     '3a7f0c52-5b1e-4d0e-8a1c-00000000a643', 'RUB', '₽'),
    ('6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0004', 'TOP-1D', 'Top', 50, interval '1 day', 990.00,
     '3a7f0c52-5b1e-4d0e-8a1c-00000000a643', 'RUB', '₽');

-- PromotionPurchase (SPEC section 3). Activation is immediate and free (decision No. 10): created Active,
-- PaymentStatus NotRequired; the worker expire-promotions moves Active -> Expired, the manager Active -> Cancelled.
CREATE TABLE promotion.purchase (
    id              uuid          PRIMARY KEY,                                   -- PurchaseId (Kafka key)
    tenant_id       uuid          NOT NULL,                                      -- the company
    buyer_user_id   uuid          NOT NULL,                                      -- the company's manager
    package_id      uuid          NOT NULL REFERENCES promotion.package (id),
    package_code    text          NOT NULL,                                      -- snapshot of the package
    package_kind    text          NOT NULL,
    boost_weight    integer       NOT NULL CHECK (boost_weight > 0),
    price_amount    numeric(12,2) NOT NULL CHECK (price_amount >= 0),
    currency_id     uuid          NOT NULL,
    currency_code   text          NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    currency_symbol text          NOT NULL,
    starts_at       timestamptz   NOT NULL,
    ends_at         timestamptz   NOT NULL,
    status          text          NOT NULL CHECK (status IN ('Active', 'Expired', 'Cancelled')),
    payment_status  text          NOT NULL DEFAULT 'NotRequired' CHECK (payment_status IN ('NotRequired')),
    version         integer       NOT NULL DEFAULT 1 CHECK (version >= 1),      -- +1 per transition (consumers' guard)
    created_at      timestamptz   NOT NULL,
    updated_at      timestamptz   NOT NULL,
    CONSTRAINT purchase_ends_after_start CHECK (ends_at > starts_at)
) WITH (
    -- Every expiry moves a row out of the partial index below (not a HOT update): the dead entries pile up at
    -- exactly the head the claim scans next. Vacuum by a small fixed number of dead rows (docs/design/claims.md).
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 200,
    autovacuum_analyze_scale_factor = 0.05,
    fillfactor = 90
);

-- The claim of expire-promotions and its next-deadline query: Active rows in EndsAt order, and nothing else.
CREATE INDEX ix_purchase_active_ends_at ON promotion.purchase (ends_at, id) WHERE status = 'Active';
-- GET /promotions/{id} is by primary key; a company's purchases for operators and consumers' replays.
CREATE INDEX ix_purchase_tenant ON promotion.purchase (tenant_id, created_at);

-- Targets are logical references into other contexts (no FK): Project, PropertyObject or Post.
CREATE TABLE promotion.purchase_target (
    purchase_id uuid     NOT NULL REFERENCES promotion.purchase (id),
    position    smallint NOT NULL CHECK (position >= 0),                     -- the order the manager gave
    target_kind text     NOT NULL CHECK (target_kind IN ('Project', 'PropertyObject', 'Post')),
    target_id   uuid     NOT NULL,
    PRIMARY KEY (purchase_id, position),
    CONSTRAINT purchase_target_unique UNIQUE (purchase_id, target_kind, target_id)
);

-- INV-6 TerminalFrozen: no change of a purchase once Expired or Cancelled (the domain checks it too).
CREATE FUNCTION promotion.purchase_terminal_frozen() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IN ('Expired', 'Cancelled') THEN
        RAISE EXCEPTION 'INV-6 TerminalFrozen: purchase % is %', OLD.id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'purchase_terminal_frozen';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END;
$$;

CREATE TRIGGER purchase_terminal_frozen
    BEFORE UPDATE OR DELETE ON promotion.purchase
    FOR EACH ROW EXECUTE FUNCTION promotion.purchase_terminal_frozen();

-- ... and its targets are frozen with it: a terminal purchase's event snapshot stays true.
CREATE FUNCTION promotion.purchase_target_terminal_frozen() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    parent_status text;
BEGIN
    SELECT status INTO parent_status FROM promotion.purchase
     WHERE id = CASE WHEN TG_OP = 'INSERT' THEN NEW.purchase_id ELSE OLD.purchase_id END;
    IF parent_status IN ('Expired', 'Cancelled') THEN
        RAISE EXCEPTION 'INV-6 TerminalFrozen: targets of a % purchase', parent_status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'purchase_terminal_frozen';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END;
$$;

CREATE TRIGGER purchase_target_terminal_frozen
    BEFORE INSERT OR UPDATE OR DELETE ON promotion.purchase_target
    FOR EACH ROW EXECUTE FUNCTION promotion.purchase_target_terminal_frozen();
