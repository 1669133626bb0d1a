"""API fuzzing with schemathesis against the app's own OpenAPI document (build_app on a real PostgreSQL).

Every operation is called with generated data (valid and invalid) and a valid token of one tenant holding every
role (admin, agent, investor, manager), so that the requests get past authentication into the handlers. The
response must never be a 5xx and must match the documented schema. A few hundred cases in the normal suite;
``--soak-long`` raises the budget to a few thousand.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from psycopg_pool import ConnectionPool
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
)

from pin.api.auth import mint_token
from pin.bootstrap import build_app
from pin.db import create_pool
from pin.settings import Settings
from tests.conftest import JWT_SECRET
from tests.support.infra import TestDatabases

pytestmark = [pytest.mark.integration]

TENANT = uuid.uuid4()
USER = uuid.uuid4()
# the few-hundred budget of the normal suite: about 20 operations x 2 modes x 10 examples
EXAMPLES_SHORT = 10
EXAMPLES_LONG = 100


@pytest.fixture(scope="module")
def fuzz_pool(test_databases: TestDatabases) -> Iterator[ConnectionPool[Any]]:
    """A migrated database of this module's own, shared by every generated case."""
    url = test_databases.create()
    pool = create_pool(url, min_size=1, max_size=4, name="fuzz")
    yield pool
    pool.close()
    test_databases.drop(url)


def _app_schema(pool: ConnectionPool[Any]) -> Any:
    """The OpenAPI document of the real app, served in process (ASGI)."""
    settings_ = Settings.model_validate({"database_url": "postgresql://unused", "jwt_secret": JWT_SECRET})
    return schemathesis.openapi.from_asgi("/openapi.json", build_app(settings_, pool))


AUTH = {
    "Authorization": "Bearer "
    + mint_token(JWT_SECRET, user_id=USER, tenant_id=TENANT, roles=["admin", "agent", "investor", "manager"])
}
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance, response_headers_conformance]


def _operations(pool: ConnectionPool[Any]) -> list[Any]:
    operations = [result.ok() for result in _app_schema(pool).get_all_operations()]
    assert len(operations) >= 15, "the OpenAPI document lost its operations"
    return operations


def run_fuzz(pool: ConnectionPool[Any], mode: GenerationMode, examples: int) -> Counter[str]:
    """``examples`` generated cases per operation in ``mode``; every response checked; counts by status class."""
    calls: Counter[str] = Counter()
    for operation in _operations(pool):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        def fuzz(case: Any) -> None:
            response = case.call_and_validate(headers=AUTH, checks=CHECKS)
            calls[f"{response.status_code // 100}xx"] += 1

        try:
            fuzz()
        except Unsatisfiable:
            # an operation with nothing to get wrong (no parameters, no body) has no negative cases
            assert mode is GenerationMode.NEGATIVE, operation.label
            calls["operations-without-negative-cases"] += 1
    print(f"fuzz ({mode}, {examples} per operation): {dict(calls)}")
    assert sum(n for k, n in calls.items() if k.endswith("xx")) >= 10 * examples, calls
    return calls


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_server_error_and_every_response_matches_its_schema(
    fuzz_pool: ConnectionPool[Any], mode: GenerationMode
) -> None:
    """Valid and invalid data on every operation: no 5xx; every response conforms to the document.
    (The long budget runs with the long soak: tests/soak/test_fuzz_long.py.)"""
    run_fuzz(fuzz_pool, mode, EXAMPLES_SHORT)
