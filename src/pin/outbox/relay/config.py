"""The relay's settings: every field a `PIN_RELAY_<FIELD>` variable."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from pin.settings import ConfigurationError


@dataclass(frozen=True)
class RelayConfig:
    """How a relay instance paces, batches, leases and retries."""

    # Rows per batch (about: spread evenly over the owned vparts, at least 8 each); one DELETE per batch.
    batch_size: int = 2000
    # Seconds between reads when no NOTIFY arrives (the fallback: NOTIFY is lost across reconnects).
    poll_interval_seconds: float = 1.0
    # Seconds between lease renewals (and acquisitions of a fair share).
    heartbeat_seconds: float = 1.0
    # Lease lifetime on the database clock: a dead instance's vparts are taken over after at most this.
    lease_ttl_seconds: float = 5.0
    # Failures of a row (broker unavailability not counted) before it is dead-lettered.
    max_attempts: int = 10
    # First retry delay of a failed row; doubles per attempt, with +-20 % jitter.
    backoff_base_seconds: float = 0.5
    # Longest retry delay; also how long a drained broker outage can delay a row after the broker returns.
    backoff_max_seconds: float = 15.0
    # librdkafka message.timeout.ms: a send fails after this, so a batch never hangs on a dead broker.
    message_timeout_ms: int = 10_000
    # Seconds between refreshes of the backlog, lag and dead-letter gauges (one bounded query each).
    gauge_refresh_seconds: float = 5.0
    # Cap of the backlog count (a bounded count, never a scan of a huge table per refresh).
    backlog_count_cap: int = 100_000

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RelayConfig:
        """Defaults overridden by PIN_RELAY_<FIELD> variables (e.g. PIN_RELAY_BATCH_SIZE=1000)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for item in fields(cls):
            name = f"PIN_RELAY_{item.name.upper()}"
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            caster = int if item.type in ("int", int) else float
            try:
                value = caster(raw)
            except ValueError:
                raise ConfigurationError(f"{name}: expected a number, got {raw!r}") from None
            if value <= 0:
                raise ConfigurationError(f"{name}: must be greater than 0")
            values[item.name] = value
        config = cls(**values)
        if config.lease_ttl_seconds < 2 * config.heartbeat_seconds:
            raise ConfigurationError("PIN_RELAY_LEASE_TTL_SECONDS: must be at least twice the heartbeat")
        return config
