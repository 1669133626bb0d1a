"""Exponential back-off: the one formula every retry loop of PIN uses."""

from __future__ import annotations

# Doubling stops here: the cap is reached long before, and the power of two never overflows a float.
_MAX_DOUBLINGS = 64


def exponential_backoff(attempt: int, *, base: float, cap: float) -> float:
    """The wait before retry ``attempt`` (1 is the first): ``base`` doubled per earlier attempt, at most ``cap``."""
    doublings = min(max(attempt - 1, 0), _MAX_DOUBLINGS)
    return float(min(cap, base * 2.0**doublings))
