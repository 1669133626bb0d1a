-- catalog context schema (owned by the catalog context)
CREATE SCHEMA IF NOT EXISTS catalog;

-- The replica of cards (Projects and PropertyObjects) from the platform's feeds; here filled by
-- PUT /catalog/cards/{kind}/{id}, a stand-in for that feed (SPEC section 9).
CREATE TABLE IF NOT EXISTS catalog.card (
    kind       text        NOT NULL CHECK (kind IN ('Project', 'PropertyObject')),
    id         uuid        NOT NULL,
    tenant_id  uuid        NOT NULL,
    -- the project a PropertyObject belongs to (a logical reference: the project card may not have arrived yet)
    project_id uuid,
    published  boolean     NOT NULL,
    version    integer     NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- ids are scoped by tenant: one tenant's write can neither probe nor overwrite another's card
    PRIMARY KEY (tenant_id, kind, id),
    -- a PropertyObject always names its project, a Project never does
    CONSTRAINT card_project_on_objects_only CHECK ((kind = 'PropertyObject') = (project_id IS NOT NULL))
);

CREATE INDEX IF NOT EXISTS card_objects_of_project
    ON catalog.card (tenant_id, project_id) WHERE kind = 'PropertyObject';

-- The newest Version of each purchase seen (seed 002: apply an event only if Version >= the stored one).
CREATE TABLE IF NOT EXISTS catalog.purchase (
    purchase_id uuid        PRIMARY KEY,
    tenant_id   uuid        NOT NULL,
    status      text        NOT NULL,
    version     integer     NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- One contribution per (purchase, target). PromotionBoost of a card is the sum of its active contributions,
-- computed when read, so it always equals that sum. A target that is not in the replica yet is kept and counts
-- when its card arrives.
CREATE TABLE IF NOT EXISTS catalog.boost_contribution (
    purchase_id      uuid        NOT NULL,
    target_kind      text        NOT NULL CHECK (target_kind IN ('Project', 'PropertyObject')),
    target_id        uuid        NOT NULL,
    tenant_id        uuid        NOT NULL,
    boost_weight     integer     NOT NULL,
    active           boolean     NOT NULL,
    purchase_version integer     NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (purchase_id, target_kind, target_id)
);

CREATE INDEX IF NOT EXISTS boost_contribution_active_by_target
    ON catalog.boost_contribution (target_kind, target_id) WHERE active;
