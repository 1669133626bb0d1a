-- news context schema (owned by the news context)
CREATE SCHEMA IF NOT EXISTS news;

-- The replica of posts; filled by PUT /news/posts/{id}, a stand-in for the platform's feed (SPEC section 9).
CREATE TABLE IF NOT EXISTS news.post (
    id         uuid        NOT NULL,
    tenant_id  uuid        NOT NULL,
    published  boolean     NOT NULL,
    version    integer     NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- ids are scoped by tenant: one tenant's write can neither probe nor overwrite another's post
    PRIMARY KEY (tenant_id, id)
);

-- The newest Version of each purchase seen (seed 002: apply an event only if Version >= the stored one).
CREATE TABLE IF NOT EXISTS news.purchase (
    purchase_id uuid        PRIMARY KEY,
    tenant_id   uuid        NOT NULL,
    status      text        NOT NULL,
    version     integer     NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- One contribution per (purchase, post); PromotionBoost of a post is the sum of its active contributions,
-- computed when read. A post not in the replica yet is kept and counts when it arrives.
CREATE TABLE IF NOT EXISTS news.boost_contribution (
    purchase_id      uuid        NOT NULL,
    post_id          uuid        NOT NULL,
    tenant_id        uuid        NOT NULL,
    boost_weight     integer     NOT NULL,
    active           boolean     NOT NULL,
    purchase_version integer     NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (purchase_id, post_id)
);

CREATE INDEX IF NOT EXISTS boost_contribution_active_by_post ON news.boost_contribution (post_id) WHERE active;
