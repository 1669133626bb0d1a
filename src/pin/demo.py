"""`pin up --demo`: sample data whose appointments and purchases expire within minutes."""

from __future__ import annotations

from pin.settings import ConfigurationError


def load_demo_data(database_url: str, jwt_secret: str) -> list[str]:
    """Insert the demo data; returns lines for the banner (tokens to try the API with)."""
    del database_url, jwt_secret
    raise ConfigurationError("--demo: the demo data arrives with the calendar and promotion contexts")
