"""Running `pin` roles as real subprocesses (for races, kill -9 and graceful stops)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from pin.local.embedded.lifetime import die_with_parent

# A folder holding another checkout's ``pin`` package (its ``src``): roles started by tests import it instead of
# this one, to show that a test fails on older code (the tests themselves still run on this checkout).
ROLE_SOURCE_VARIABLE = "PIN_TEST_ROLE_SOURCE"


class RoleProcess:
    """One `python -m pin ...` child with its own environment; stdout and stderr go to a log file.

    Start it from the thread that will outlive it (the test's): it is killed when that thread ends. ``prefix`` runs
    the role through another command that execs it (``ip netns exec NAME``, ``prlimit``): the pid stays the role's.
    """

    def __init__(self, args: list[str], env: Mapping[str, str], log_path: Path, prefix: Sequence[str] = ()) -> None:
        self.args = args
        self.log_path = log_path
        full_env = {**os.environ, **env}
        role_source = os.environ.get(ROLE_SOURCE_VARIABLE)
        if role_source:
            full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [role_source, full_env.get("PYTHONPATH")]))
        self._log = log_path.open("ab")
        # prefix: a command that execs the role, e.g. ("prlimit", "--nofile=256:4096")
        self.process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "pin", *args],
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # SIGKILL once the thread that started it ends: a killed test run leaves no role behind
            preexec_fn=die_with_parent(signal.SIGKILL),  # noqa: PLW1509 - one prctl before the exec
        )

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    def kill9(self) -> None:
        """SIGKILL: the process dies wherever it is, no cleanup."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def wait(self, timeout: float) -> int:
        """Wait for exit; returns the exit code."""
        return self.process.wait(timeout)

    def output(self) -> str:
        """What the child has written so far."""
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        """Kill the child if it is still running and close its log."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()
