"""The one classification of failures (pin.faults): poison, contended or infrastructure, by SQLSTATE class."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg import errors as e
from psycopg_pool import PoolTimeout

from pin.calendar.domain import ConflictError, InvalidTransitionError, SlotNotBookedError
from pin.faults import TREATMENTS, Fault, database_unreachable, fault_of, sqlstate_fault, treatment_table

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("error", "fault"),
    [
        # about the item: its data, a guard (the state machines' triggers raise 23514), a broken deploy, a bug
        (e.CheckViolation("ck_appointment_status_transition"), Fault.POISON),
        (e.NotNullViolation("null value"), Fault.POISON),
        (e.InvalidTextRepresentation("bad input"), Fault.POISON),
        (e.NumericValueOutOfRange("out of range"), Fault.POISON),
        (e.RaiseException("a trigger's plain RAISE"), Fault.POISON),
        (e.UndefinedTable("relation does not exist"), Fault.POISON),
        (e.ProgramLimitExceeded("index row too large"), Fault.POISON),
        (SlotNotBookedError(), Fault.POISON),
        (ValueError("a bug"), Fault.POISON),
        # a race lost
        (e.DeadlockDetected("deadlock"), Fault.CONTENDED),
        (e.SerializationFailure("could not serialize"), Fault.CONTENDED),
        (e.LockNotAvailable("lock timeout"), Fault.CONTENDED),
        (ConflictError(), Fault.CONTENDED),
        # the server's or the connection's state
        (e.QueryCanceled("canceling statement due to statement timeout"), Fault.INFRASTRUCTURE),
        (e.DiskFull("could not extend file"), Fault.INFRASTRUCTURE),
        (e.OutOfMemory("out of memory"), Fault.INFRASTRUCTURE),
        (e.TooManyConnections("too many clients"), Fault.INFRASTRUCTURE),
        (e.AdminShutdown("terminating connection"), Fault.INFRASTRUCTURE),
        (e.CannotConnectNow("the database system is starting up"), Fault.INFRASTRUCTURE),
        (e.IoError("could not read block"), Fault.INFRASTRUCTURE),
        (e.ReadOnlySqlTransaction("cannot execute UPDATE in a read-only transaction"), Fault.INFRASTRUCTURE),
        (e.IdleInTransactionSessionTimeout("idle-in-transaction timeout"), Fault.INFRASTRUCTURE),
        (e.ConnectionFailure("connection failure"), Fault.INFRASTRUCTURE),
        (psycopg.OperationalError("connection refused"), Fault.INFRASTRUCTURE),  # no SQLSTATE: client side
        (psycopg.InterfaceError("the connection is closed"), Fault.INFRASTRUCTURE),
        (PoolTimeout("no connection"), Fault.INFRASTRUCTURE),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else value.value,
)
def test_each_failure_has_one_fault(error, fault):
    assert fault_of(error) is fault
    assert fault.transient is (fault is not Fault.POISON)


def test_the_sqlstate_class_decides_even_for_codes_psycopg_has_no_class_for():
    assert sqlstate_fault("40XYZ") is Fault.CONTENDED
    assert sqlstate_fault("53999") is Fault.INFRASTRUCTURE
    assert sqlstate_fault("57P05") is Fault.INFRASTRUCTURE
    assert sqlstate_fault("58P03") is Fault.INFRASTRUCTURE
    assert sqlstate_fault("08XYZ") is Fault.INFRASTRUCTURE
    assert sqlstate_fault("22XYZ") is Fault.POISON
    assert sqlstate_fault(None) is Fault.INFRASTRUCTURE


def test_the_driver_error_behind_a_domain_error_decides():
    def raised(exc: Exception, cause: Exception) -> Exception:
        try:
            raise exc from cause
        except Exception as caught:
            return caught

    assert fault_of(raised(RuntimeError("wrapped"), e.QueryCanceled("timeout"))) is Fault.INFRASTRUCTURE
    assert fault_of(raised(InvalidTransitionError(), e.CheckViolation("guard"))) is Fault.POISON
    assert fault_of(raised(ConflictError(), e.DeadlockDetected("deadlock"))) is Fault.CONTENDED


@pytest.mark.parametrize(
    ("error", "unreachable"),
    [
        (psycopg.OperationalError("connection refused"), True),  # no SQLSTATE: the client could not reach it
        (psycopg.InterfaceError("the connection is closed"), True),
        (PoolTimeout("no connection"), True),
        (e.QueryCanceled("canceling statement due to statement timeout"), False),  # it answered, with its state
        (e.DiskFull("could not extend file"), False),
        (e.AdminShutdown("terminating connection"), False),
        (e.DeadlockDetected("deadlock"), False),
        (ValueError("a bug"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_only_a_failure_without_an_answer_is_the_database_unreachable(error, unreachable):
    assert database_unreachable(error) is unreachable
    assert not unreachable or fault_of(error) is Fault.INFRASTRUCTURE  # a precise part of infrastructure


class _Conn:
    broken = True
    closed = False


def test_a_broken_connection_makes_any_failure_infrastructure():
    assert fault_of(e.CheckViolation("guard"), _Conn()) is Fault.INFRASTRUCTURE  # type: ignore[arg-type]


def test_an_unreadable_message_is_its_own_fault_and_the_only_one_a_consumer_dead_letters():
    from pin.messaging.envelope import UnreadableMessageError

    assert fault_of(UnreadableMessageError("not JSON")) is Fault.UNREADABLE
    assert not Fault.UNREADABLE.transient  # the workers never see one; were they to, it is not retried as transient
    assert [fault for fault in Fault if fault.dead_letters] == [Fault.UNREADABLE]


def test_the_poison_items_page_shows_the_code_s_table_of_treatments():
    page = (Path(__file__).resolve().parents[2] / "docs" / "design" / "poison-items.md").read_text(encoding="utf-8")
    assert treatment_table() in page
    assert sorted(t.fault.value for t in TREATMENTS) == sorted(f.value for f in Fault)  # each fault once
