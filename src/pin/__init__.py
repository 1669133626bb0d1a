"""PIN background jobs and integration events."""

__version__ = "0.1.0"
