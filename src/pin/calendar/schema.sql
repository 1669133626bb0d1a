-- calendar context schema (owned by the calendar context)
CREATE SCHEMA IF NOT EXISTS calendar;
