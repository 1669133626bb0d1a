"""The calendar context."""
