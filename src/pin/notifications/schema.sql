-- notifications context schema (owned by the notifications context)
CREATE SCHEMA IF NOT EXISTS notifications;
