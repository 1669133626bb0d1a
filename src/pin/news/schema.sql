-- news context schema (owned by the news context)
CREATE SCHEMA IF NOT EXISTS news;
