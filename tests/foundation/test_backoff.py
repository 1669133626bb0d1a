"""The one exponential back-off formula."""

from __future__ import annotations

import pytest

from pin.backoff import exponential_backoff


def test_the_first_retry_waits_the_base_and_each_next_one_twice_as_long() -> None:
    assert [exponential_backoff(n, base=0.5, cap=100.0) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]


def test_the_wait_never_exceeds_the_cap() -> None:
    assert [exponential_backoff(n, base=1.0, cap=5.0) for n in (3, 4, 5, 50)] == [4.0, 5.0, 5.0, 5.0]


@pytest.mark.parametrize("attempt", [10_000, 2**40])
def test_a_huge_attempt_number_is_the_cap_not_an_overflow(attempt: int) -> None:
    assert exponential_backoff(attempt, base=0.2, cap=15.0) == 15.0


def test_attempt_zero_or_below_waits_the_base() -> None:
    assert exponential_backoff(0, base=2.0, cap=60.0) == 2.0
