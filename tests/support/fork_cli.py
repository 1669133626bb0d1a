"""Run many `pin <args>` invocations as forks of one process that imported `pin.cli` once.

Each case is a fresh child process (its own environment, argv, stdout and stderr, exit code) forked after the
imports (of `pin.cli` and of the roles' modules), so a case costs a fork and the role's start, not a Python
start-up and 0.5-1 s of imports. The child runs
the same `pin.cli.main` that `python -m pin` runs. A setting read at import time would be read here from the
driver's environment, not the case's, and its case would fail: this can only make a check stricter.

Protocol: a JSON list of ``[args, env, timeout]`` on stdin; a JSON list of ``{"code", "stdout", "stderr"}`` on
stdout (``code`` null when the child did not exit within its timeout and was killed). Cases run ``--parallel``
at a time (default 4). Run it as ``python -m tests.support.fork_cli``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the roles' modules, imported once here rather than in every child
import pin.bootstrap
import pin.cli
import pin.local.up


@dataclass
class Child:
    """A forked case: its pid, its output files and its deadline."""

    index: int
    pid: int
    out: Path
    err: Path
    deadline: float


def _run_child(args: list[str], env: dict[str, str], out: Path, err: Path) -> None:
    """In the forked child: the case's environment and argv, stdout/stderr into files, `pin.cli.main`, exit."""
    code = 0
    try:
        os.environ.clear()
        os.environ.update(env)
        for fd, path in ((1, out), (2, err)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = ["pin", *args]
        pin.cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # the child reports like a process would: a traceback on stderr, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_cases(cases: list[tuple[list[str], dict[str, str], float]], parallel: int) -> list[dict[str, Any]]:
    """Fork each case (``parallel`` at a time), wait for it or kill it at its deadline, collect its output."""
    results: list[dict[str, Any]] = [{} for _ in cases]
    running: dict[int, Child] = {}
    pending = list(enumerate(cases))
    with tempfile.TemporaryDirectory(prefix="pin-fork-cli-") as folder:
        while pending or running:
            while pending and len(running) < parallel:
                index, (args, env, timeout) = pending.pop(0)
                out, err = Path(folder) / f"{index}.out", Path(folder) / f"{index}.err"
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _run_child(args, env, out, err)
                running[pid] = Child(index, pid, out, err, time.monotonic() + timeout)
            _reap(running, results)
    return results


def _reap(running: dict[int, Child], results: list[dict[str, Any]]) -> None:
    """Collect children that exited; kill those past their deadline; sleep briefly when none exited."""
    reaped = False
    for pid, child in list(running.items()):
        done, status = os.waitpid(pid, os.WNOHANG)
        if not done and time.monotonic() > child.deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            code: int | None = None
        elif not done:
            continue
        else:
            code = os.waitstatus_to_exitcode(status)
        results[child.index] = {
            "code": code,
            "stdout": child.out.read_text(errors="replace") if child.out.exists() else "",
            "stderr": child.err.read_text(errors="replace") if child.err.exists() else "",
        }
        del running[pid]
        reaped = True
    if not reaped:
        time.sleep(0.02)


def main() -> None:
    """Read the cases from stdin, run them, write the results to stdout."""
    parallel = int(sys.argv[sys.argv.index("--parallel") + 1]) if "--parallel" in sys.argv else 4
    cases = [(list(args), dict(env), float(timeout)) for args, env, timeout in json.load(sys.stdin)]
    results = run_cases(cases, parallel)
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    main()
