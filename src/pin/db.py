"""PostgreSQL access: connection pools, migrations, named query files and the shared clock.

Every connection of every role is opened here, so that each one detects a dead peer within seconds (libpq
keepalives and ``tcp_user_timeout``) and each session tells the server to give up on a dead client too
(``idle_in_transaction_session_timeout``, ``statement_timeout``, the server's own keepalives,
``tcp_user_timeout`` and ``client_connection_check_interval``). The bounds: docs/operations.md, "A network that
drops packets".
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal, LiteralString, cast
from urllib.parse import urlencode

import psycopg
import structlog
from psycopg import generators
from psycopg.conninfo import conninfo_to_dict
from psycopg.errors import _WaitTimeout
from psycopg.pq import ConnStatus, ExecStatus, TransactionStatus
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import ConnectionPool

if TYPE_CHECKING:
    from pin.settings import Settings

Conn = psycopg.Connection[dict[str, object]]

log = structlog.get_logger(__name__)

# A statement of a query file starts at a "-- name --" line; the comment lines right after it are its description.
_QUERY_HEADER = re.compile(r"^-- ([a-z0-9_]+) --\n(?:--.*\n)*", re.MULTILINE)

# Whose sessions a connection serves: each has its own statement_timeout (PIN_<ROLE>_STATEMENT_TIMEOUT_MS);
# "command" is a one-shot command (pin status, pin dlq, the outbox commands), "migrate" a migration (no limit).
Role = Literal["api", "worker", "relay", "consumer", "command", "migrate"]
# the roles whose every statement is the hot path's (claims, cascade writes, the relay's read, the inbox)
HOT_ROLES: frozenset[Role] = frozenset({"worker", "relay", "consumer"})


@dataclass(frozen=True)
class ConnectionPolicy:
    """How a role's connections detect a dead peer: libpq's client parameters and the session's server settings."""

    # libpq parameters (connect_timeout, keepalives_*, tcp_user_timeout), as strings, added to every connection
    client: Mapping[str, str] = field(default_factory=dict)
    # server settings SET when a connection is opened (name -> value, in the server's units)
    session: Mapping[str, str] = field(default_factory=dict)
    # the longest the pool's check of an idle connection waits for its answer before discarding it
    check_timeout_seconds: float = 2.0

    @classmethod
    def from_settings(cls, settings: Settings, role: Role) -> ConnectionPolicy:
        """The policy of ``role`` from the PIN_DATABASE_* settings and the role's statement timeout."""
        client = {
            "connect_timeout": str(settings.database.connect_timeout_seconds),
            "keepalives": "1",
            "keepalives_idle": str(settings.database.keepalives_idle_seconds),
            "keepalives_interval": str(settings.database.keepalives_interval_seconds),
            "keepalives_count": str(settings.database.keepalives_count),
            "tcp_user_timeout": str(settings.database.tcp_user_timeout_ms),
        }
        session = {
            "statement_timeout": str(_statement_timeout_ms(settings, role)),
            "idle_in_transaction_session_timeout": str(settings.database.idle_in_transaction_timeout_ms),
            # the server's side of the same socket: a backend sending to (or idle with) a dead client gives up
            "tcp_keepalives_idle": str(settings.database.keepalives_idle_seconds),
            "tcp_keepalives_interval": str(settings.database.keepalives_interval_seconds),
            "tcp_keepalives_count": str(settings.database.keepalives_count),
            "tcp_user_timeout": str(settings.database.tcp_user_timeout_ms),
            # a backend running a long query for a client that is gone notices it (needs the keepalives above)
            "client_connection_check_interval": str(settings.database.client_connection_check_interval_ms),
            # every execution planned on its parameters and the tables as they are now, never a generic plan cached
            # while a table was empty or tiny (docs/design/claims.md: "Plans that do not rot")
            "plan_cache_mode": "force_custom_plan",
            # no JIT compilation: it pays off for long analytical queries only, which no role runs, and estimates
            # such as the relay's (a priced-out scan, a subplan per vpart) or a gauge's over a large outbox pass its
            # thresholds, so a server built with LLVM (jit = on by default) would compile, inline and optimize every
            # execution anew (force_custom_plan): 1 s of its CPU a statement for the relay's floor advance and the
            # gauges read, measured on PostgreSQL 15 (bench/README.md, third round)
            "jit": "off",
        }
        if role in HOT_ROLES:
            # every statement of the hot path finds its rows by key: a sequential scan is never its plan, even
            # when statistics taken while a table was tiny say the whole table is a page or two (docs/design/claims.md)
            session["enable_seqscan"] = "off"
        if role == "api":
            # the one rule for row-lock waits of every API route: a bounded wait, then a 409 (LockNotAvailable, 55P03,
            # which the API's one error mapping answers: pin.api.problems)
            session["lock_timeout"] = lock_timeout_value(settings.api.lock_timeout_seconds)
        return cls(client=client, session=session, check_timeout_seconds=settings.database.check_timeout_seconds)


def lock_timeout_value(seconds: float) -> str:
    """``seconds`` as a lock_timeout value; at least 1 ms (0 would mean no limit)."""
    return f"{max(1, round(seconds * 1000))}ms"


def _statement_timeout_ms(settings: Settings, role: Role) -> int:
    """The role's statement_timeout in milliseconds (0: none, for migrations)."""
    timeouts = {
        "api": settings.database.api_statement_timeout_ms,
        "worker": settings.database.worker_statement_timeout_ms,
        "relay": settings.database.relay_statement_timeout_ms,
        "consumer": settings.database.consumer_statement_timeout_ms,
        "command": settings.database.command_statement_timeout_ms,
        "migrate": 0,
    }
    return timeouts[role]


def server_release_bound_seconds(settings: Settings, role: Role) -> float:
    """The longest the server keeps a cut-off (or killed) session of ``role`` and its locks, in seconds.

    The statement running at the cut runs at most to its statement_timeout; then the session either idles in
    its transaction (ended after idle_in_transaction_session_timeout) or is stuck sending its answer to the
    client that is gone (ended after the server's tcp_user_timeout), whichever applies.
    """
    statement = _statement_timeout_ms(settings, role)
    idle = max(settings.database.idle_in_transaction_timeout_ms, settings.database.tcp_user_timeout_ms)
    return (statement + idle) / 1000


def dead_peer_bound_seconds(settings: Settings) -> float:
    """The longest a connection of ours takes to know its peer is gone, in seconds (libpq's side).

    With data unacknowledged, tcp_user_timeout ends it; waiting for an answer, the keepalive probes start after
    keepalives_idle of silence and the kernel ends it at the first probe past tcp_user_timeout (or after
    keepalives_count unanswered probes); one more interval covers the probe timer's step.
    """
    probes = settings.database.keepalives_idle_seconds + (
        settings.database.keepalives_interval_seconds * settings.database.keepalives_count
    )
    return max(settings.database.tcp_user_timeout_ms / 1000, probes) + settings.database.keepalives_interval_seconds


def pool_answer_bound_seconds(settings: Settings, pool_timeout: float) -> float:
    """The longest a caller of a pool waits when the database is unreachable: a statement in flight fails
    within :func:`dead_peer_bound_seconds`; a new caller waits at most ``pool_timeout`` for a connection, plus
    one bounded check of an idle one."""
    return max(dead_peer_bound_seconds(settings), pool_timeout + settings.database.check_timeout_seconds)


def default_policy(role: Role = "command") -> ConnectionPolicy:
    """The policy of ``role`` with the settings' defaults (the environment not read): for tests and tools."""
    from pin.settings import Settings

    return ConnectionPolicy.from_settings(Settings.model_construct(), role)


def client_parameters(url: str, policy: ConnectionPolicy) -> dict[str, str]:
    """The policy's libpq parameters that ``url`` does not set itself (a user URL's own parameters win)."""
    own = conninfo_to_dict(url)
    return {name: value for name, value in policy.client.items() if name not in own}


def session_settings(url: str, policy: ConnectionPolicy) -> dict[str, str]:
    """The policy's server settings that ``url``'s ``options`` (``-c name=value``) does not set itself."""
    own = _options_settings(str(conninfo_to_dict(url).get("options") or ""))
    return {name: value for name, value in policy.session.items() if name not in own}


def _options_settings(options: str) -> set[str]:
    """The names of the settings a libpq ``options`` string sets (``-c name=value``, ``-cname=value``, ``--name=v``)."""
    names: set[str] = set()
    try:
        words = shlex.split(options)  # libpq escapes a space in a value with a backslash, as a shell does
    except ValueError:
        words = options.split()
    for index, word in enumerate(words):
        if word == "-c" and index + 1 < len(words):
            assignment = words[index + 1]
        elif word.startswith("-c") or word.startswith("--"):
            assignment = word[2:]
        else:
            continue
        names.add(assignment.partition("=")[0].replace("-", "_").strip())
    return names


def apply_session(conn: Conn, settings: Mapping[str, str]) -> None:
    """SET the session's server settings (a SET, not the startup ``options``: PgBouncer refuses those)."""
    if not settings:
        return
    pairs = [psycopg.sql.SQL("set_config({}, {}, false)").format(name, value) for name, value in settings.items()]
    query = psycopg.sql.SQL("SELECT {}").format(psycopg.sql.SQL(", ").join(pairs))
    conn.execute(query)
    if not conn.autocommit:
        conn.commit()  # a pool wants its connections idle; a session setting outlives the commit


def connect(
    url: str, *, autocommit: bool = False, policy: ConnectionPolicy | None = None, **kwargs: object
) -> psycopg.Connection[dict[str, object]]:
    """One connection with dict rows and the role's dead-peer policy (default: a command's); the caller closes it."""
    policy = policy if policy is not None else default_policy()
    conn = psycopg.connect(
        url,
        autocommit=autocommit,
        row_factory=dict_row,
        **{**client_parameters(url, policy), **kwargs},  # type: ignore[arg-type]
    )
    try:
        apply_session(conn, session_settings(url, policy))
    except BaseException:
        conn.close()
        raise
    return conn


# How long a pool keeps retrying one lost connection before that attempt ends. psycopg_pool waits 1 s before the
# first retry and doubles the wait with no bound until this timeout (its default is 300 s): after a 150 s outage
# the next retry came up to about 100 s after the server was back (1, 3, 7, ... 127, 255 s). An attempt that ended
# frees its place, and the next request that finds the pool empty opens a new one at once, retried after 1, 2, 4 s:
# no two tries are more than 4 s apart, however long the outage (tests/foundation/test_pool_reconnect.py).
POOL_RECONNECT_TIMEOUT_SECONDS = 10.0


def create_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    name: str = "pin",
    timeout: float = 30.0,
    policy: ConnectionPolicy | None = None,
) -> ConnectionPool[psycopg.Connection[dict[str, object]]]:
    """A connection pool whose connections yield dict rows, carry the role's policy (its session settings SET
    once per new connection) and are checked before use (a check that gets no answer within the policy's
    bound discards the connection)."""
    policy = policy if policy is not None else default_policy()
    session = session_settings(url, policy)

    def configure_session(conn: psycopg.Connection[dict[str, object]]) -> None:
        apply_session(conn, session)

    return ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        timeout=timeout,  # seconds a caller waits for a connection before PoolTimeout
        reconnect_timeout=POOL_RECONNECT_TIMEOUT_SECONDS,
        open=True,
        check=lambda conn: check_connection(conn, policy.check_timeout_seconds),
        configure=configure_session,
        kwargs={"row_factory": dict_row, **client_parameters(url, policy)},
        connection_class=psycopg.Connection[dict[str, object]],
    )


def check_connection(conn: Conn, timeout: float) -> None:
    """Raise unless an idle connection answers an empty query within ``timeout`` seconds (then it is closed).

    The pool's own check waits as long as the kernel does; on a link that drops packets, that is the whole
    ``tcp_user_timeout`` for each pooled connection in turn, while a request waits.
    """
    if conn.closed or conn.broken or conn.info.transaction_status is not TransactionStatus.IDLE:
        raise psycopg.OperationalError("the connection is not idle")
    pgconn = conn.pgconn
    try:
        pgconn.send_query(b"")
        results = conn.wait(generators.execute(pgconn), timeout=timeout)
    except _WaitTimeout:
        conn.close()
        raise psycopg.OperationalError(f"no answer to the connection check within {timeout:g} s") from None
    except psycopg.Error:
        conn.close()
        raise
    if pgconn.status != ConnStatus.OK or any(r.status != ExecStatus.EMPTY_QUERY for r in results):
        conn.close()  # the server ended the session (its FATAL came as the answer)
        raise psycopg.OperationalError("the connection check failed: the session is gone")


def sqlalchemy_url(url: str, parameters: Mapping[str, str] | None = None) -> str:
    """The libpq URL rewritten for SQLAlchemy's psycopg 3 dialect (used by Alembic only), with ``parameters``
    added to its query string."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            url = "postgresql+psycopg://" + url[len(prefix) :]
            break
    if parameters:
        url += ("&" if "?" in url else "?") + urlencode(dict(parameters))
    return url


def migrate(url: str, policy: ConnectionPolicy | None = None) -> None:
    """Apply every pending migration (idempotent; safe to run from several processes at once)."""
    # imported here: Alembic (and SQLAlchemy under it) costs seconds at start and only migrations need it
    from alembic import command
    from alembic.config import Config

    policy = policy if policy is not None else default_policy("migrate")
    config = Config()
    # env.py SETs these on its connection (the role's statement_timeout: none; the dead-peer settings stay)
    config.attributes["session_settings"] = session_settings(url, policy)
    config.set_main_option("script_location", str(resources.files("pin") / "migrations"))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url, client_parameters(url, policy)).replace("%", "%%"))
    command.upgrade(config, "head")


def database_now(conn: psycopg.Connection[dict[str, object]]) -> datetime:
    """The database server's clock: the one clock every instance shares (SPEC section 4)."""
    row = conn.execute("SELECT clock_timestamp() AS now").fetchone()
    assert row is not None
    value = row["now"]
    assert isinstance(value, datetime)
    return value


def parse_queries(text: str) -> dict[str, LiteralString]:
    """The statements of a query file by name (the text before the first name is the file's own comment)."""
    parts = _QUERY_HEADER.split(text)
    names, bodies = parts[1::2], parts[2::2]
    if len(set(names)) != len(names):
        raise ValueError(f"a query name is used twice in {names}")
    # the file is part of the package, as trusted as a literal in the code
    return {name: cast(LiteralString, body.strip()) for name, body in zip(names, bodies, strict=True)}


def kept_cursor(conn: Conn, *, binary: bool = False) -> psycopg.Cursor[tuple[Any, ...]]:
    """A tuple-row cursor kept with ``conn`` for the connection's life (dropped with it), for a statement run once an
    item: a new cursor per execute costs its construction and a cold adapters' cache (each parameter's and column's
    type looked up again): about 85 µs of client CPU an appointment-timeout item for its two (bench/README.md). Only
    the thread holding ``conn`` uses it; ``binary`` asks for the results in binary form."""
    kept: dict[bool, psycopg.Cursor[tuple[Any, ...]]] = vars(conn).setdefault("_pin_kept_cursors", {})
    cur = kept.get(binary)
    if cur is None or cur.closed:
        cur = kept[binary] = conn.cursor(row_factory=tuple_row, binary=binary)
    return cur


def load_queries(package: str, file_name: str = "queries.sql") -> dict[str, LiteralString]:
    """The named statements of a package's query file, as written (never reformatted)."""
    return parse_queries(resources.files(package).joinpath(file_name).read_text(encoding="utf-8"))


def _milliseconds(seconds: float | None) -> int | None:
    """``seconds`` as a limit's milliseconds: 0 is none, any other at least 1 (rounding must not make it none)."""
    if seconds is None or seconds == 0:
        return None if seconds is None else 0
    return max(1, round(seconds * 1000))


@contextmanager
def limits(
    conn: Conn,
    *,
    lock_timeout: float | None = None,
    statement_timeout: float | None = None,
    idle_in_transaction: float | None = None,
    session: bool = False,
) -> Iterator[None]:
    """The one place a connection's limits change after the role's policy (:class:`ConnectionPolicy`) set them.

    In seconds, each left as it is when None: ``lock_timeout`` (the wait for a row lock; 0: none),
    ``statement_timeout`` (a cap: a lower one already set stays) and ``idle_in_transaction`` (the server ends a
    transaction idle that long; 0: never).
    They hold for ``conn``'s current transaction only (``SET LOCAL``), put back at the end of the block while it is
    still open; with ``session`` for every transaction until the block ends (set and committed at once when no
    transaction was open; at the end any open transaction is rolled back and the limits put back, and a connection
    that cannot be put back is closed: its pool then discards it). As River's ``WithTimeoutV``.
    """
    params = {
        "lock_timeout_ms": _milliseconds(lock_timeout),
        "statement_timeout_ms": _milliseconds(statement_timeout),
        "idle_ms": _milliseconds(idle_in_transaction),
        "local": not session,
    }
    if all(value is None for name, value in params.items() if name != "local"):
        yield
        return
    was_idle = conn.info.transaction_status is TransactionStatus.IDLE
    row = conn.execute(_QUERIES["limits_set"], params).fetchone()
    assert row is not None
    before = {
        "lock_timeout": row["lock_timeout"],
        "statement_timeout": row["statement_timeout"],
        "idle_in_transaction_session_timeout": row["idle_in_transaction_session_timeout"],
        "local": not session,
    }
    if session and was_idle:
        conn.commit()  # a session's setting outlives the commit, and is undone by a rollback
    if not session:
        yield
        if conn.info.transaction_status is TransactionStatus.INTRANS:
            conn.execute(_QUERIES["limits_restore"], before)
        return
    try:
        yield
    finally:
        _restore_session(conn, before)


def _restore_session(conn: Conn, before: Mapping[str, object]) -> None:
    """End any open transaction and put the session's limits back; close the connection when that fails."""
    if conn.closed or conn.broken:
        return
    try:
        if conn.info.transaction_status is not TransactionStatus.IDLE:
            conn.rollback()
        conn.execute(_QUERIES["limits_restore"], before)
        conn.commit()
    except psycopg.Error as exc:
        # One line with the error's text, never a traceback: the usual cause is a connection the server ended
        # (a restart, pg_terminate_backend), which the pool replaces; an operator needs the what, not the where.
        log.warning("could not put a connection's limits back; closing it", error=f"{type(exc).__name__}: {exc}")
        conn.close()


_QUERIES = load_queries("pin", "db.sql")
