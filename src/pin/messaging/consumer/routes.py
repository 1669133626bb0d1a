"""What a consumer group supplies per topic: a parse of the payload and the effect (a :class:`Route`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from pin.db import Conn
from pin.messaging.envelope import UnreadableMessageError

T = TypeVar("T")


@dataclass
class HandlingContext:
    """What a handler knows about the message it handles, and how it reports unknown enum values."""

    group: str
    topic: str
    message_id: uuid.UUID
    unknown: list[tuple[str, str]] = field(default_factory=list)
    # what the handler reads from its statements' results, run once they are in (see :meth:`after_results`)
    pending: list[Callable[[], None]] = field(default_factory=list)

    def unknown_value(self, field_name: str, raw: str) -> None:
        """Record an enum value this consumer does not know; logged and counted once the message is handled."""
        self.unknown.append((field_name, raw))

    def after_results(self, check: Callable[[], None]) -> None:
        """Run ``check`` once the results of the statements sent so far are in, still in the transaction.

        A batch's statements are sent in one pipeline (one round trip for all of them); a handler that only
        logs from a result (a row count, an ignored Version) reads it here instead of waiting for it at once.
        """
        self.pending.append(check)

    def run_pending(self) -> None:
        """The checks :meth:`after_results` deferred, in the order they were made."""
        for check in self.pending:
            check()
        self.pending.clear()


# A batch's messages for an effect: each new message's model and context, in offset order.
Items = Sequence[tuple[T, HandlingContext]]


@dataclass(frozen=True)
class Route(Generic[T]):
    """How a group handles one topic: a pure parse of the payload, then the effect in the caller's transaction.

    The effect takes the new messages of a batch at once (a lone message is a batch of one), so that a group can
    write each table with one set-based statement per batch; its end state must be that of applying the messages
    one after another in offset order. A route of a successor contract (a ``.v2`` topic) says its version.
    """

    parse: Callable[[Mapping[str, Any]], T]
    apply_many: Callable[[Conn, Items[T]], None]
    # the ContractVersion of the contract this route reads (its topic's ``.v<N>``): a message with another is
    # logged as an unknown contract version (and handled: tolerant reader)
    contract_version: int = 1

    def parse_or_unreadable(self, payload: Mapping[str, Any]) -> T:
        """The handler's model of the payload; a validation error makes the message unreadable."""
        try:
            return self.parse(payload)
        except ValidationError as exc:
            raise UnreadableMessageError(_validation_summary(exc)) from exc


def _validation_summary(exc: ValidationError) -> str:
    """Which fields are wrong and why, without the input values."""
    parts = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()]
    return "invalid payload: " + "; ".join(parts)
