"""The run tests/foundation/test_interrupted_run.py starts and kills: not collected by the suite (no test_ prefix).

Its one test takes what a test run starts (the session's PostgreSQL, a broker, a role process), writes the pids to
``PIN_TEST_INTERRUPTED_MARKER`` and waits to be killed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import psycopg

from pin.local.embedded.kafka import EmbeddedKafka
from tests.support.processes import RoleProcess


def test_wait_to_be_killed(database_url: str, kafka: EmbeddedKafka, spawn_role: Callable[..., RoleProcess]) -> None:
    """Everything started, pids written; then wait (the outer test kills this run with SIGKILL)."""
    role = spawn_role("consume", "crm", env={"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers})
    assert kafka.process is not None
    with psycopg.connect(database_url) as conn:  # a backend's parent is the postmaster
        postmaster = psutil.Process(conn.info.backend_pid).ppid()
    started = {"worker": os.getpid(), "role": role.pid, "broker": kafka.process.pid, "postgres": postmaster}
    marker = Path(os.environ["PIN_TEST_INTERRUPTED_MARKER"])
    marker.with_suffix(".tmp").write_text(json.dumps(started))
    marker.with_suffix(".tmp").rename(marker)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.2)
