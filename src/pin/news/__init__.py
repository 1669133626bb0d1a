"""The news context."""
