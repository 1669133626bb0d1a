"""Soak options: ``--soak-long`` runs the long fault schedule (15+ minutes) and the long fuzzing budget."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--soak-long`` (used by `make soak`)."""
    parser.addoption(
        "--soak-long",
        action="store_true",
        default=False,
        help="run the long soak (at least 15 minutes of faults) and a few thousand fuzzing cases",
    )


@pytest.fixture
def soak_long(request: pytest.FixtureRequest) -> bool:
    """Whether the long mode was asked for."""
    return bool(request.config.getoption("--soak-long", default=False))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long fuzzing budget belongs to the long mode only: deselected (not skipped) without ``--soak-long``."""
    if config.getoption("--soak-long", default=False):
        return
    long_only = [item for item in items if item.nodeid.startswith("tests/soak/test_fuzz_long.py")]
    if long_only:
        config.hook.pytest_deselected(items=long_only)
        items[:] = [item for item in items if item not in long_only]
