"""The catalog context."""
