"""A consumer instance's settings, built once from :class:`~pin.settings.Settings` (as the relay's RelayConfig is)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from pin.settings import ConsumerSettings, KafkaSettings, Settings

# ConsumerConfig's fields that are settings: the section and the field of Settings each is read from (its default is
# written there)
_FROM_SETTINGS = {
    "unreadable_attempts": ("consumers", "unreadable_attempts"),
    "max_message_bytes": ("kafka", "max_message_bytes"),
    "inbox_retention_seconds": ("consumers", "inbox_retention_seconds"),
    "membership_interval": ("consumers", "membership_heartbeat_seconds"),
    "lanes": ("consumers", "lanes"),
    "max_ahead": ("consumers", "max_ahead"),
}
_SECTIONS = {"consumers": ConsumerSettings, "kafka": KafkaSettings}


def _read(settings: Settings | None, name: str) -> Any:
    """The setting ``name`` is read from, in ``settings``; with None, its default (written in its section only)."""
    section, field = _FROM_SETTINGS[name]
    return getattr(_SECTIONS[section]() if settings is None else getattr(settings, section), field)


def _default(name: str) -> Any:
    """The default of the setting ``name`` is read from."""
    return _read(None, name)


@dataclass(frozen=True)
class ConsumerConfig:
    """How a consumer instance polls, batches, retries, dead-letters and keeps its books (the settings' meaning:
    pin.settings.Settings; the others are the runtime's own, which tests shorten)."""

    # attempts at an unreadable message before it is dead-lettered (the only failure that is: pin.faults.TREATMENTS)
    unreadable_attempts: int = _default("unreadable_attempts")
    # the retry back-off: exponential from the base, with jitter, up to the cap (seconds)
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    # the longest a poll waits for a message (seconds)
    poll_timeout: float = 0.5
    # the most messages of a partition applied in one transaction
    batch_size: int = 200
    # how long a connection is waited for (seconds)
    db_timeout: float = 5.0
    # a dead letter not acknowledged within this long fails then, instead of lingering in the queue for minutes
    dlq_timeout: float = 15.0
    dead_letter_attempts: int = 3
    # the largest value a consumer reads, and the dead-letter producer's message.max.bytes
    max_message_bytes: int = _default("max_message_bytes")
    inbox_retention_seconds: float = _default("inbox_retention_seconds")
    inbox_prune_interval: float = 600.0
    # librdkafka's statistics feed the lag gauge (0 disables them)
    statistics_interval_ms: int = 10_000
    # how often the instance's row of messaging.consumer_member is written (seconds)
    membership_interval: float = _default("membership_interval")
    # lanes per partition (lanes.py), and the most messages of a partition in hand before it is paused
    lanes: int = _default("lanes")
    max_ahead: int = _default("max_ahead")

    def __post_init__(self) -> None:
        if self.unreadable_attempts < 1:
            raise ValueError("unreadable_attempts must be at least 1")
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if self.dead_letter_attempts < 1:
            raise ValueError("dead_letter_attempts must be at least 1")
        if self.lanes < 1 or self.max_ahead < 1:
            raise ValueError("lanes and max_ahead must be at least 1")

    @property
    def threaded(self) -> bool:
        """Several lanes: each runs in its own thread; one lane is handled by the runtime's loop itself."""
        return self.lanes > 1

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> ConsumerConfig:
        """The consumers' part of ``settings`` (validated when they were loaded), with ``overrides`` (a test's)."""
        read = {name: _read(settings, name) for name in _FROM_SETTINGS}
        return cls(**{**read, **overrides})

    @classmethod
    def field_names(cls) -> frozenset[str]:
        """The names :meth:`from_settings` takes as overrides."""
        return frozenset(item.name for item in fields(cls))
