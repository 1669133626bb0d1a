-- catalog's statements: the card replica and its PromotionBoost (cards.py). The boost's own writes are
-- pin/boost/queries.sql, on catalog's tables.
-- Each statement starts with a "-- name --" line and its description; loaded by pin.db.load_queries.

-- card_with_boost --
-- PromotionBoost = the sum of the active contributions of the same tenant to this card, plus, for a published
-- PropertyObject, those to its project (seed 002: a Project's contribution cascades to its published objects).
SELECT c.kind, c.id, c.project_id, c.published, c.version, c.updated_at,
       COALESCE((
           SELECT sum(b.boost_weight) FROM catalog.boost_contribution AS b
           WHERE b.active AND b.tenant_id = c.tenant_id
             AND ((b.target_kind = c.kind AND b.target_id = c.id)
                  OR (c.kind = 'PropertyObject' AND c.published AND b.target_kind = 'Project'
                      AND b.target_id = c.project_id))
       ), 0)::bigint AS promotion_boost
FROM catalog.card AS c
WHERE c.kind = %s AND c.id = %s AND c.tenant_id = %s

-- card_upsert --
-- Ids are scoped by tenant (the primary key): another tenant's card with the same id is a different row.
INSERT INTO catalog.card AS c (kind, id, tenant_id, project_id, published) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (tenant_id, kind, id) DO UPDATE
SET project_id = EXCLUDED.project_id, published = EXCLUDED.published, version = c.version + 1, updated_at = now()
WHERE %s::integer IS NULL OR c.version = %s::integer
RETURNING (xmax = 0) AS created
