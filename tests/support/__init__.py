"""Test helpers: real PostgreSQL and broker, subprocess roles, topic readers."""
