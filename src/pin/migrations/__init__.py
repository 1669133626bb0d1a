"""Alembic migrations of the PIN database (a schema per bounded context)."""
