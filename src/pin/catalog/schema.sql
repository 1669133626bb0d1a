-- catalog context schema (owned by the catalog context)
CREATE SCHEMA IF NOT EXISTS catalog;
