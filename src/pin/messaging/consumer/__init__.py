"""The consumer runtime every consumer group runs on, one module per concern (see docs/design/consumers.md)."""

from pin.messaging.consumer.config import ConsumerConfig
from pin.messaging.consumer.received import Received
from pin.messaging.consumer.routes import HandlingContext, Items, Route
from pin.messaging.consumer.runtime import ConsumerRuntime

__all__ = ["ConsumerConfig", "ConsumerRuntime", "HandlingContext", "Items", "Received", "Route"]
