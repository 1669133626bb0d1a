"""The base of every context's domain errors: plain Python, so a domain that imports it still does no IO."""

from __future__ import annotations


class DocumentedError(Exception):
    """An error whose message, unless one is given, is its class's docstring."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())
