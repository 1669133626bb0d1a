"""One mechanism for "a child ends with whoever started it": the kernel's parent-death signal (Linux).

A process started with :func:`die_with_parent` gets ``signal`` from the kernel when the thread that started it
ends, even when its parent is killed with SIGKILL and can clean nothing up. `pin up` starts its broker and its
PostgreSQL this way, and the test fixtures start every server, broker and role this way, so that a killed test run
(a CI time limit, a closed terminal, `kill -9` of pytest) leaves nothing running. Start a long-lived child from a
thread that outlives it (the main thread): the signal follows the *thread* that forked, not the process.
Elsewhere than on Linux it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

# prctl(2): the signal a process gets when its parent thread ends.
_PR_SET_PDEATHSIG = 1


def _prctl_pdeathsig(signum: int) -> None:
    """PR_SET_PDEATHSIG for the calling process (raises OSError when the kernel refuses)."""
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def die_with_parent(signum: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child gets ``signum`` once its parent thread ends.

    ``None`` off Linux. It runs in the child after ``user=``'s setuid (which would clear the setting), and does
    nothing but one prctl before the exec, so nothing a thread of the parent could hold is touched.
    """
    if sys.platform != "linux":
        return None
    parent = os.getpid()

    def _preexec() -> None:
        _prctl_pdeathsig(signum)
        if os.getppid() != parent:  # the parent died before prctl: the kernel will send nothing
            os.kill(os.getpid(), signum)

    return _preexec


def die_with_own_parent(signum: int = signal.SIGKILL) -> None:
    """The same for the calling process itself (a pytest-xdist worker, whose start we do not control)."""
    if sys.platform != "linux":
        return
    _prctl_pdeathsig(signum)
