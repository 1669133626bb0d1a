-- messaging context schema (owned by the messaging context)
CREATE SCHEMA IF NOT EXISTS messaging;
