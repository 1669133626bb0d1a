"""The long fuzzing budget (a few thousand cases) runs with the long soak: `pytest tests/soak --soak-long`.

Only collected with ``--soak-long`` (see conftest.py); the normal suite runs the short budget in tests/fuzz.
"""

from __future__ import annotations

from typing import Any

import pytest
from psycopg_pool import ConnectionPool
from schemathesis.generation import GenerationMode

from tests.fuzz.test_api_fuzz import EXAMPLES_LONG, fuzz_pool, run_fuzz

__all__ = ["fuzz_pool"]  # the fixture, imported so that pytest finds it here

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_long_fuzz(fuzz_pool: ConnectionPool[Any], mode: GenerationMode) -> None:
    """EXAMPLES_LONG cases per operation and mode: no 5xx, every response matches the document."""
    run_fuzz(fuzz_pool, mode, EXAMPLES_LONG)
