"""RFC 3339 date-time text with an offset: the one rule for request bodies and consumed messages alike."""

from __future__ import annotations

import re

# RFC 3339 section 5.6: full date, "T", full time with seconds (a fraction of at most nanoseconds), and "Z" or a
# numeric offset; ASCII digits only (``\d`` alone would also take other scripts' digits).
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def is_rfc3339(text: str) -> bool:
    """Whether ``text`` is, as a whole, an RFC 3339 date-time with an offset."""
    return RFC3339.fullmatch(text) is not None
