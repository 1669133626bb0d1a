"""An expire-promotions interval below the seed's 1 to 5 minutes (tests, demos) is allowed, with one warning line
at start naming the range; one within it starts without."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.support.processes import RoleProcess

pytestmark = pytest.mark.integration

WARNING = "PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS is below the seed's range of 1 to 5 minutes"


def _warnings(spawn_role: Callable[..., RoleProcess], interval: str) -> list[dict[str, object]]:
    worker = spawn_role(
        "worker", "expire-promotions", "--once", env={"PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS": interval}
    )
    assert worker.wait(60) == 0, worker.output()
    lines = [json.loads(line) for line in worker.output().splitlines() if line.startswith("{")]
    return [line for line in lines if str(line.get("event", "")).startswith(WARNING)]


def test_an_interval_below_the_seeds_range_starts_with_one_warning(spawn_role: Callable[..., RoleProcess]) -> None:
    (line,) = _warnings(spawn_role, "30")
    assert (line["level"], line["interval_seconds"]) == ("warning", 30.0)
    assert _warnings(spawn_role, "60") == []
