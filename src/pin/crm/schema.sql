-- crm context schema (owned by the crm context)
CREATE SCHEMA IF NOT EXISTS crm;
