-- news' statements: the post replica and its PromotionBoost (posts.py). The boost's own writes are
-- pin/boost/queries.sql, on news' tables.
-- Each statement starts with a "-- name --" line and its description; loaded by pin.db.load_queries.

-- post_with_boost --
-- PromotionBoost = the sum of the active contributions of the same tenant to this post.
SELECT p.id, p.published, p.version, p.updated_at,
       COALESCE((
           SELECT sum(b.boost_weight) FROM news.boost_contribution AS b
           WHERE b.active AND b.post_id = p.id AND b.tenant_id = p.tenant_id
       ), 0)::bigint AS promotion_boost
FROM news.post AS p
WHERE p.id = %s AND p.tenant_id = %s

-- post_upsert --
-- Ids are scoped by tenant (the primary key): another tenant's post with the same id is a different row.
INSERT INTO news.post AS p (id, tenant_id, published) VALUES (%s, %s, %s)
ON CONFLICT (tenant_id, id) DO UPDATE
SET published = EXCLUDED.published, version = p.version + 1, updated_at = now()
WHERE %s::integer IS NULL OR p.version = %s::integer
RETURNING (xmax = 0) AS created
