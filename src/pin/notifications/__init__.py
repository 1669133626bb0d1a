"""The notifications context."""
