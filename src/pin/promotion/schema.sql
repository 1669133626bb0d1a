-- promotion context schema (owned by the promotion context)
CREATE SCHEMA IF NOT EXISTS promotion;
