"""What every context's domain errors share (their base, the race-lost marker).

Plain Python, so a domain that imports it still does no IO.
"""

from __future__ import annotations


class DocumentedError(Exception):
    """An error whose message, unless one is given, is its class's docstring."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class Contended:
    """Marks a domain error that means a race lost (a guarded write matched no row): ``pin.faults.Fault.CONTENDED``."""
