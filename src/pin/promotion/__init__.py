"""The promotion context."""
