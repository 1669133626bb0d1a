"""Each vpart's floor: where every reader of the waiting rows starts (docs/design/outbox-storage.md).

The rows of vpart ``l`` that may be waiting are three disjoint parts, given here as statement fragments over a floor
row ``l`` (an ``outbox.relay_floor`` row, or a floor a relay keeps: relay/kept_floors.py) and an outbox row ``m``
(queries.sql), each with the one index that reads it: ``past``, the rows past the floor id, in id order along
``(vpart, id)``; ``since``, those at or below it whose transaction began after the floor's snapshot, a range along
``(vpart, xid)``; ``running``, those whose transaction was running at that snapshot, a probe per transaction along
the same index. The relay's read and the floor's advance (relay/queries.sql) embed them, each part with its own
filters and limit, so that a read stops after its share of rows whatever the backlog; the view
``outbox.unpublished`` (migrations 0006, 0008) is the same three parts, for the gauges, ``pin status`` and an
operator's console.
"""

from __future__ import annotations

from pin.db import load_queries

_QUERIES = load_queries(__package__)

# the fragments by the name a statement gives them ({past}, {since}, {running})
FLOORS = {
    "past": _QUERIES["outbox_floor_past"],
    "since": _QUERIES["outbox_floor_since"],
    "running": _QUERIES["outbox_floor_running"],
}
# run first in a transaction that reads the parts (the relay's read, the heartbeat's floor advance, the gauges)
PLAN_BY_INDEX = _QUERIES["outbox_plan_by_index"]
