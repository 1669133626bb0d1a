"""The contexts' problem tables, combined: each error answers its nearest class's status and code."""

from __future__ import annotations

import pytest

from pin.api.problems import DomainProblem, combined, domain_problem
from pin.bootstrap import http_contexts
from pin.calendar import domain as calendar
from pin.catalog.cards import CardVersionMismatchError
from pin.promotion import domain as promotion

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("error", "status", "code", "detail"),
    [
        # a subclass with an entry of its own wins over its listed base
        (calendar.AppointmentNotPendingError("not pending"), 409, "appointment-not-pending", "not pending"),
        # a subclass without one answers its nearest listed base
        (calendar.SlotNotBookedError("x"), 409, "inconsistent-state", "x"),
        # a rule without an entry answers its context's root
        (promotion.PurchaseNotDueError("y"), 409, "conflict", "y"),
        (promotion.VersionMismatchError("z"), 412, "version-mismatch", "z"),
        # an entry with its own detail does not show the error's message
        (CardVersionMismatchError(), 412, "precondition-failed", "the card changed since the given ETag"),
    ],
)
def test_a_domain_error_answers_its_nearest_entry(error: Exception, status: int, code: str, detail: str) -> None:
    problem = domain_problem(error, combined(context.problems for context in http_contexts()))

    assert (problem.status, problem.code, problem.detail) == (status, code, detail)


def test_an_error_in_two_tables_is_refused() -> None:
    table = {calendar.SlotNotFoundError: DomainProblem(404, "slot-not-found")}

    with pytest.raises(ValueError, match="SlotNotFoundError"):
        combined([table, table])
