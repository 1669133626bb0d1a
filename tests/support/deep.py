"""The size of the property-based and soak-style cases: smaller under `make test`, full under `make test-deep`.

`make test` must stay within its 300 s budget on 2 cores and still exercise every behaviour once; the full size
(every example, every try, the whole fault schedule) runs under `make test-deep` (`pytest -m deep --deep`), which
`.ci/run` runs after the README's test command. A test that scales with it is marked ``@pytest.mark.deep``; one that
is slow and covers what a cheaper test of `make test` covers too runs under `make test-deep` only, marked
``@pytest.mark.deep(only=True)`` (tests/conftest.py deselects it without ``--deep``).
"""

from __future__ import annotations

# set once by tests/conftest.py's pytest_configure from ``--deep``, before any test module is imported (the
# Hypothesis decorators read it at import)
DEEP = False


def examples(full: int, *, share: int = 5, least: int = 50) -> int:
    """``full`` Hypothesis examples under --deep; else a fifth of them (at least ``least``)."""
    return full if DEEP else max(least, full // share)
