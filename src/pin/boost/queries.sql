-- The boost's statements, one set for each context that keeps a boost (catalog, news). They are templates:
-- pin.boost.contributions.BoostTables fills {purchase} and {contribution} with the context's tables and the {key...}
-- fields with its contribution key's columns (catalog: target_kind, target_id; news: post_id), once, when the
-- context's tables are declared. The Version rule of seed 002 is written here once for both contexts.
-- Each statement starts with a "-- name --" line and its description; loaded by pin.db.load_queries.

-- purchase_versions --
-- The stored Versions of the purchases with several events in the batch, locked (in one order, so two batches
-- cannot deadlock) until the transaction ends: the reduction starts from them, and nothing changes them before the
-- batch's statements run.
SELECT purchase_id, version FROM {purchase} WHERE purchase_id = ANY(%b::uuid[]) ORDER BY purchase_id FOR UPDATE

-- purchase_upsert --
-- Seed 002 «Guard монотонности»: an event applies only if its Version >= the stored one (replay and reorder safe).
-- One row per purchase: the last event of the batch that applies (its first one's tenant when new).
INSERT INTO {purchase} AS p (purchase_id, tenant_id, status, version)
SELECT * FROM unnest(%b::uuid[], %b::uuid[], %b::text[], %b::int[])
ON CONFLICT (purchase_id) DO UPDATE
SET status = EXCLUDED.status, version = EXCLUDED.version, updated_at = now()
WHERE p.version <= EXCLUDED.version
RETURNING p.purchase_id

-- contribution_upsert --
-- The named contributions' end state. Parameters, one array each: purchase_id, the key's columns, tenant_id,
-- boost_weight, active, purchase_version, final_version. Like the next statement it ends with the guard "the stored
-- Version is the batch's last for this purchase" (final_version), so that it changes nothing for a purchase whose
-- upsert was ignored; it needs no answer from the upsert first, and the batch's statements go in one round trip.
INSERT INTO {contribution} AS c
    (purchase_id, {key}, tenant_id, boost_weight, active, purchase_version)
SELECT r.purchase_id, {key_of_r}, r.tenant_id, r.boost_weight, r.active, r.purchase_version
FROM unnest(%b::uuid[], {key_arrays}, %b::uuid[], %b::int[], %b::bool[], %b::int[], %b::int[])
    AS r(purchase_id, {key}, tenant_id, boost_weight, active, purchase_version, final_version)
WHERE EXISTS (SELECT FROM {purchase} AS p WHERE p.purchase_id = r.purchase_id AND p.version = r.final_version)
ON CONFLICT (purchase_id, {key}) DO UPDATE
SET boost_weight = EXCLUDED.boost_weight, active = EXCLUDED.active,
    purchase_version = EXCLUDED.purchase_version, updated_at = now()
WHERE c.purchase_version <= EXCLUDED.purchase_version

-- contributions_deactivate_dropped --
-- A target a newer Version no longer names stops contributing. Parameters, one array each: purchase_id,
-- first_version (the Version that drops them), final_version (the guard), then the keys each purchase's events
-- name: purchase_id and the key's columns.
UPDATE {contribution} AS c
SET active = false, purchase_version = d.first_version, updated_at = now()
FROM unnest(%b::uuid[], %b::int[], %b::int[]) AS d(purchase_id, first_version, final_version)
WHERE c.purchase_id = d.purchase_id AND c.active
  AND NOT EXISTS (
      SELECT FROM unnest(%b::uuid[], {key_arrays}) AS n(purchase_id, {key})
      WHERE n.purchase_id = c.purchase_id AND {key_matches}
  )
  AND EXISTS (SELECT FROM {purchase} AS p WHERE p.purchase_id = d.purchase_id AND p.version = d.final_version)
