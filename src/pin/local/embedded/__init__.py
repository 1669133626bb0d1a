"""Embedded PostgreSQL and Kafka-compatible broker for `pin up` and the test suite (development only)."""
