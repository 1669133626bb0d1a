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
    return bool(request.config.getoption("--soak-long"))
