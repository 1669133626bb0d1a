"""The handling side's decisions, without a broker or a database: they are pure, or made before any I/O."""

from __future__ import annotations

import ast
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
import structlog

from pin.db import Conn
from pin.messaging.consumer import ConsumerConfig, Items, Received, Route
from pin.messaging.consumer.decisions import (
    WHOLE_PARTITION,
    Handled,
    HoldUntil,
    PausePartition,
    hold,
    scope_of,
)
from pin.messaging.consumer.handling import MessageHandling
from pin.messaging.consumer.retry import Failure, failure_of
from pin.messaging.envelope import UnreadableMessageError
from pin.settings import ConsumerSettings, Settings

pytestmark = pytest.mark.unit

CONSUMER = Path(__file__).resolve().parents[2] / "src" / "pin" / "messaging" / "consumer"


def _message(offset: int, key: bytes, *, topic: str = "t", value: bytes | None = None) -> Received:
    value = value or json.dumps({"MessageId": str(uuid.uuid4()), "ContractVersion": 1}).encode()
    return Received(topic, 3, offset, key, value, [], 0)


def test_one_lane_a_failed_message_holds_its_whole_partition_and_pauses_it():
    later = [_message(11, b"b"), _message(12, b"a")]
    decisions, others = hold(
        _message(10, b"a"), 2, Failure(ValueError(), dead_letter=False, retry_in=1.5), later, threaded=False, now=100.0
    )
    assert others == []
    [until, pause] = decisions
    assert isinstance(until, HoldUntil)
    assert until.key == ("t", 3, WHOLE_PARTITION)
    assert (until.held.message.offset, until.held.attempts, until.held.retry_at) == (10, 2, 101.5)
    assert [m.offset for m in until.held.behind] == [11, 12]
    assert pause == PausePartition(("t", 3), 1.5)


def test_several_lanes_a_failed_message_holds_only_its_key_and_pauses_nothing():
    later = [_message(11, b"b"), _message(12, b"a"), _message(13, b"c")]
    failure = Failure(UnreadableMessageError("x"), dead_letter=False, unreadable_attempts=1, retry_in=0.25)
    decisions, others = hold(_message(10, b"a"), 1, failure, later, threaded=True, now=5.0)
    [until] = decisions
    assert isinstance(until, HoldUntil)
    assert until.key == ("t", 3, b"a")
    assert [m.offset for m in until.held.behind] == [12]
    assert (until.held.retry_at, until.held.unreadable_attempts) == (5.25, 1)
    assert [m.offset for m in others] == [11, 13]  # the other keys go on, in offset order


def test_the_scope_is_the_key_only_with_lanes():
    message = _message(1, b"k")
    assert scope_of(message, threaded=True) == b"k"
    assert scope_of(message, threaded=False) == WHOLE_PARTITION


@pytest.mark.parametrize(
    ("exc", "earlier", "dead_letter", "counted"),
    [
        (UnreadableMessageError("not JSON"), 0, False, 1),
        (UnreadableMessageError("not JSON"), 2, True, 3),  # the third unreadable attempt: dead-lettered
        (psycopg.errors.DeadlockDetected("x"), 2, False, 2),  # a failure of a readable message: never counted
        (ValueError("a bug"), 9, False, 9),
    ],
)
def test_only_unreadable_attempts_bring_a_message_to_its_dead_letter(exc, earlier, dead_letter, counted):
    failure = failure_of(exc, unreadable_attempts=earlier, max_unreadable_attempts=3)
    assert (failure.dead_letter, failure.unreadable_attempts, failure.exc) == (dead_letter, counted, exc)


def _never(conn: Conn, items: Items[Any]) -> None:
    raise AssertionError("no effect may be applied")


def _handling(routes: dict[str, Route[Any]], *, stop: bool = False) -> MessageHandling:
    handling = MessageHandling(
        group="crm", routes=routes, pool=None, config=ConsumerConfig(), member="m",  # type: ignore[arg-type]
        log=structlog.get_logger("test"),
    )  # fmt: skip
    stopped = threading.Event()
    if stop:
        stopped.set()
    handling.start(stopped, debug=False)
    return handling


def test_messages_of_a_topic_the_group_does_not_handle_are_each_committed_past():
    messages = [_message(4, b"a", topic="other"), _message(5, b"b", topic="other")]
    decisions = list(_handling({}).process(messages, attempts=1))
    assert decisions == [Handled(("other", 3), (4,)), Handled(("other", 3), (5,))]


def test_after_a_stop_request_no_transaction_begins_and_nothing_is_decided():
    """The pool is None: a transaction begun would fail the test; nothing is committed past (read again)."""
    route: Route[Any] = Route(dict, _never)
    handling = _handling({"t": route}, stop=True)
    assert list(handling.process([_message(1, b"a"), _message(2, b"b")], attempts=1)) == []
    assert list(handling.process([_message(1, b"a")], attempts=2)) == []


def test_the_config_is_the_settings_with_a_tests_overrides():
    settings = Settings(consumer_lanes=4, consumer_unreadable_attempts=5)
    config = ConsumerConfig.from_settings(settings, batch_size=7)
    assert (config.lanes, config.unreadable_attempts, config.batch_size, config.threaded) == (4, 5, 7, True)
    assert ConsumerConfig().lanes == ConsumerSettings().lanes
    with pytest.raises(ValueError, match="batch_size"):
        ConsumerConfig(batch_size=0)


@pytest.mark.parametrize("module", ["handling.py", "decisions.py"])
def test_the_handling_side_never_reaches_the_consumer(module):
    tree = ast.parse((CONSUMER / module).read_text(encoding="utf-8"))
    imported = {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in ([node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
    }
    assert not {name for name in imported if name.startswith(("confluent_kafka", "pin.messaging.consumer.runtime"))}
