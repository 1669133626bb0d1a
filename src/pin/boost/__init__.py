"""PromotionBoost from purchase-changed: the rule catalog and news share, each on its own tables (seed 002)."""
