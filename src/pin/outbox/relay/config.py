"""The relay's settings: each field is one of Settings' ``relay`` section (a `PIN_RELAY_<FIELD>` variable)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from pin.settings import RelaySettings, Settings


def _default(name: str) -> Any:
    """The default of the relay section's ``name``: the defaults (and their meaning) are written there only."""
    return getattr(RelaySettings(), name)


@dataclass(frozen=True)
class RelayConfig:
    """How a relay instance paces, batches, leases and retries (meaning of each field: pin.settings.RelaySettings)."""

    batch_size: int = _default("batch_size")
    batches_in_flight: int = _default("batches_in_flight")
    poll_interval_seconds: float = _default("poll_interval_seconds")
    heartbeat_seconds: float = _default("heartbeat_seconds")
    lease_ttl_seconds: float = _default("lease_ttl_seconds")
    max_attempts: int = _default("max_attempts")
    backoff_base_seconds: float = _default("backoff_base_seconds")
    backoff_max_seconds: float = _default("backoff_max_seconds")
    message_timeout_ms: int = _default("message_timeout_ms")
    undelivered_give_up_seconds: float = _default("undelivered_give_up_seconds")
    gauge_refresh_seconds: float = _default("gauge_refresh_seconds")
    backlog_count_cap: int = _default("backlog_count_cap")

    @classmethod
    def from_settings(cls, settings: Settings) -> RelayConfig:
        """The relay's part of ``settings`` (validated when they were loaded: every value positive, TTL >= 2 beats)."""
        return cls(**{item.name: getattr(settings.relay, item.name) for item in fields(cls)})
