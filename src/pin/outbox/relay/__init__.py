"""The outbox relay: publishes outbox rows to Kafka at least once, in commit order per key, from any number of
instances (SPEC section 5). How and why: docs/design/relay.md."""

from pin.outbox.relay.config import RelayConfig
from pin.outbox.relay.hooks import RelayHooks, hooks_for_fault
from pin.outbox.relay.relay import OutboxRelay

__all__ = ["OutboxRelay", "RelayConfig", "RelayHooks", "hooks_for_fault"]
