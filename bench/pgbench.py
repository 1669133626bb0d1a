"""Running pgbench with a generated script and reading its result."""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit


@dataclass(frozen=True)
class PgbenchResult:
    """What pgbench reported."""

    transactions: int
    tps: float
    latency_ms: float
    seconds: float
    output: str


def connection_args(url: str) -> tuple[list[str], dict[str, str]]:
    """pgbench's -h/-p/-U arguments and the database name for a libpq URL."""
    parts = urlsplit(url)
    args = ["-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432), "-U", parts.username or "postgres"]
    env = {"PGPASSWORD": parts.password} if parts.password else {}
    database = parts.path.lstrip("/") or "postgres"
    return [*args, database], env


def run_pgbench(
    pgbench: str,
    url: str,
    script: Path,
    *,
    clients: int,
    transactions_per_client: int,
    constants: dict[str, str],
    log_path: Path,
    timeout: float = 600,
) -> PgbenchResult:
    """``pgbench -n -M prepared -f script -c C -j C -t T -D ...`` on ``url``; raises on failure."""
    import os

    conn_args, env = connection_args(url)
    defines: list[str] = []
    for name, value in constants.items():
        defines += ["-D", f"{name}={value}"]
    argv = [
        pgbench,
        "-n",
        "-M",
        "prepared",
        "-f",
        str(script),
        "-c",
        str(clients),
        "-j",
        str(clients),
        "-t",
        str(transactions_per_client),
        *defines,
        *conn_args,
    ]
    started = time.monotonic()
    completed = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env}, check=False
    )
    seconds = time.monotonic() - started
    output = completed.stdout + completed.stderr
    log_path.write_text(output)
    if completed.returncode != 0:
        raise RuntimeError(f"pgbench failed (exit {completed.returncode}); see {log_path}:\n{output[-2000:]}")
    processed = re.search(r"number of transactions actually processed: (\d+)", output)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", output)
    latency = re.search(r"latency average = ([\d.]+) ms", output)
    if not (processed and tps and latency):
        raise RuntimeError(f"bench: could not read pgbench's output; see {log_path}")
    failed = re.search(r"number of failed transactions: (\d+)", output)
    if failed and int(failed.group(1)) > 0:
        raise RuntimeError(f"pgbench: {failed.group(1)} failed transactions; see {log_path}")
    return PgbenchResult(int(processed.group(1)), float(tps.group(1)), float(latency.group(1)), seconds, output)
