"""The console's last gaps: each consumer instance's row names its partitions and its lanes
(``messaging.consumer_member``), a job of ``operations.replay_job`` replays or discards
(``operations.replay_job.action``), and since when each replication slot or standby has held the xmin horizon
(``operations.xmin_horizon_hold``). The statements are ``messaging/migrations.sql`` and ``operations/migrations.sql``.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import op

from pin.db import load_queries

revision = "0009"
down_revision = "0008"

_MESSAGING = load_queries("pin.messaging", "migrations.sql")
_OPERATIONS = load_queries("pin.operations", "migrations.sql")


def upgrade() -> None:
    """The members' partitions and lanes; the jobs' action; the slots' and standbys' holds."""
    op.execute(_MESSAGING["0009_upgrade"])
    op.execute(_OPERATIONS["0009_upgrade"])


def downgrade() -> None:
    """Both gone (development only)."""
    op.execute(_OPERATIONS["0009_downgrade"])
    op.execute(_MESSAGING["0009_downgrade"])
