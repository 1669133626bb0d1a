"""The embedded PostgreSQL's unprivileged system user is created once and safely, however many processes start a
server at the same moment (a fresh machine's first `make test`: four xdist workers at once; two `pin up`; the bench
beside a test run). The user's name is a parameter: the test creates and removes a throwaway user of its own.
"""

from __future__ import annotations

import multiprocessing
import os
import pwd
import subprocess
import uuid
from multiprocessing.synchronize import Barrier
from pathlib import Path
from queue import Queue

import pytest

from pin.local.embedded.postgres import EmbeddedPostgres

pytestmark = [
    pytest.mark.slow,
    pytest.mark.deep,  # make test: 3 processes, 2 tries; make test-deep: 4 processes, 6 tries
    pytest.mark.skipif(os.geteuid() != 0, reason="only root creates a system user (the server runs as it)"),
]


def _start_at_the_barrier(name: str, folder: str, barrier: Barrier, results: Queue[tuple[str, int, str]]) -> None:
    """One process of the race: wait for the others, start a server as ``name``, say which uid ran it."""
    try:
        barrier.wait(120)
        server = EmbeddedPostgres(Path(folder), system_user=name)
        server.start()
        try:
            uid = (Path(folder) / "PG_VERSION").stat().st_uid  # the user initdb wrote the cluster as
        finally:
            server.destroy()
        results.put(("ok", uid, ""))
    except Exception as exc:
        results.put(("failed", -1, f"{type(exc).__name__}: {exc}"))


def _entries(name: str) -> list[int]:
    """The uids /etc/passwd holds for ``name`` (a race leaves several)."""
    with open("/etc/passwd") as passwd:
        return [int(line.split(":")[2]) for line in passwd if line.split(":", 1)[0] == name]


def _remove_user(name: str) -> None:
    """userdel until no entry of ``name`` is left (only ever our own throwaway user)."""
    assert name.startswith("pintest"), name
    for _ in range(10):
        if not _entries(name):
            return
        subprocess.run(["userdel", name], capture_output=True, check=False)
    assert not _entries(name), f"could not remove the throwaway user {name}"


def test_processes_starting_servers_at_once_create_the_system_user_once(tmp_path: Path, deep_run: bool) -> None:
    """Several processes released from a barrier start embedded servers as a user that does not exist yet, several
    times: every server starts, all of them as the one uid the user has at the end, and passwd has one entry."""
    processes, tries = (4, 6) if deep_run else (3, 2)
    context = multiprocessing.get_context("spawn")  # a clean interpreter per process, as separate programs are
    for attempt in range(tries):
        name = f"pintest{uuid.uuid4().hex[:8]}"  # a fresh name each try: the user never exists before the race
        assert not _entries(name)
        try:
            barrier = context.Barrier(processes)
            results: Queue[tuple[str, int, str]] = context.Queue()
            workers = [
                context.Process(
                    target=_start_at_the_barrier, args=(name, str(tmp_path / f"{attempt}-{i}" / "pg"), barrier, results)
                )
                for i in range(processes)
            ]
            for worker in workers:
                worker.start()
            outcomes = [results.get(timeout=240) for _ in workers]
            for worker in workers:
                worker.join(30)
            entries = _entries(name)
            assert len(entries) == 1, f"try {attempt}: passwd holds {name} {len(entries)} times: {entries}"
            final_uid = pwd.getpwnam(name).pw_uid
            assert outcomes == [("ok", final_uid, "")] * processes, f"try {attempt}: {outcomes}, final uid {final_uid}"
        finally:
            _remove_user(name)
