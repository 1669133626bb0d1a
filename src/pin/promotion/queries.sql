-- The promotion's statements; each starts with a "-- name --" line and its description, loaded by
-- pin.db.load_queries. The first block is the purchase's read shape and the statements of the HTTP use cases
-- (repository.py: packages, a purchase's insert, read and guarded transition); the expire-promotions worker's
-- statements (its claims, its set-based write, its backlog) are in expiry.sql.
-- {purchase_columns} and {purchase_targets} in a statement stand for the two fragments below (repository.py fills
-- them in once, when it loads this file).

-- purchase_columns --
-- A purchase's columns, in the order of repository.purchase_from_values, read FROM promotion.purchase AS p
-- {purchase_targets}.
p.id, p.tenant_id, p.buyer_user_id, p.package_id, p.package_code, p.package_kind, p.boost_weight,
p.price_amount, p.currency_id, p.currency_code, p.currency_symbol, p.starts_at, p.ends_at, p.status,
p.payment_status, p.version, p.created_at, p.updated_at, t.target_kinds, t.target_ids

-- purchase_targets --
-- A purchase's targets, in position order, as two arrays (a uuid[] loads in C; a JSON document of them was parsed
-- in Python and its ids once more by uuid.UUID): one aggregate row per purchase, NULL arrays when it has none.
CROSS JOIN LATERAL (
    SELECT array_agg(t.target_kind ORDER BY t.position) AS target_kinds,
           array_agg(t.target_id ORDER BY t.position) AS target_ids
      FROM promotion.purchase_target AS t WHERE t.purchase_id = p.id
) AS t

-- package_list_on_offer --
-- The packages a manager can activate, cheapest first.
SELECT * FROM promotion.package WHERE on_offer ORDER BY price_amount, code

-- package_get --
-- One package by id (on offer or withdrawn).
SELECT * FROM promotion.package WHERE id = %s

-- purchase_insert --
-- A new purchase (its targets: purchase_target_insert).
INSERT INTO promotion.purchase
    (id, tenant_id, buyer_user_id, package_id, package_code, package_kind, boost_weight, price_amount,
     currency_id, currency_code, currency_symbol, starts_at, ends_at, status, payment_status, version,
     created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)

-- purchase_target_insert --
-- One target of a new purchase, at its position.
INSERT INTO promotion.purchase_target (purchase_id, position, target_kind, target_id) VALUES (%s, %s, %s, %s)

-- purchase_get --
-- A purchase of a tenant with its targets (another tenant's is not found, like a missing one).
SELECT {purchase_columns} FROM promotion.purchase AS p {purchase_targets}
 WHERE p.id = %s AND p.tenant_id = %s

-- purchase_get_locked --
-- purchase_get with the purchase's row lock: it waits for (and then reads past) an in-flight transition, and while
-- held the expire-promotions claim skips the row (seed 002, A1).
SELECT {purchase_columns} FROM promotion.purchase AS p {purchase_targets}
 WHERE p.id = %s AND p.tenant_id = %s
   FOR NO KEY UPDATE OF p

-- purchase_update_status --
-- A transition, guarded: only an Active row at the version that was read changes (zero rows is a conflict).
UPDATE promotion.purchase
   SET status = %s, version = %s, updated_at = %s
 WHERE id = %s AND status = 'Active' AND version = %s
