"""The connection layer's dead-peer policy on a real PostgreSQL: libpq parameters and session settings on every
connection and pool, a user URL's own parameters winning, the pool's check bounded."""

from __future__ import annotations

import os
import signal
import time

import psycopg
import pytest

from pin.db import ConnectionPolicy, Role, check_connection, connect, create_pool, kept_cursor, migrate
from pin.faults import Fault, fault_of
from pin.settings import ConfigurationError, Settings

_SERVER_SETTINGS = (
    "statement_timeout",
    "idle_in_transaction_session_timeout",
    "tcp_keepalives_idle",
    "tcp_keepalives_interval",
    "tcp_keepalives_count",
    "tcp_user_timeout",
    "client_connection_check_interval",
    "plan_cache_mode",
    "enable_seqscan",
    "jit",
)


def _policy(role: Role, **overrides: object) -> ConnectionPolicy:
    return ConnectionPolicy.from_settings(Settings.model_validate(overrides), role)


def _shown(conn: psycopg.Connection[dict[str, object]]) -> dict[str, str]:
    """The session's values of the server settings, in the server's base units (ms or s)."""
    rows = conn.execute(
        "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [list(_SERVER_SETTINGS)]
    ).fetchall()
    return {str(row["name"]): str(row["setting"]) for row in rows}


def test_a_connection_carries_the_roles_client_and_session_settings(database_url: str) -> None:
    policy = _policy("worker", database_keepalives_idle_seconds=7, worker_statement_timeout_ms=4_321)
    with connect(database_url, policy=policy) as conn:
        assert conn.info.transaction_status is psycopg.pq.TransactionStatus.IDLE  # the SETs were committed
        params = conn.info.get_parameters()
        assert params["keepalives_idle"] == "7"
        assert params["tcp_user_timeout"] == "10000"
        assert params["keepalives"] == "1"
        assert _shown(conn) == {
            "statement_timeout": "4321",
            "idle_in_transaction_session_timeout": "10000",
            "tcp_keepalives_idle": "7",
            "tcp_keepalives_interval": "2",
            "tcp_keepalives_count": "3",
            "tcp_user_timeout": "10000",
            "client_connection_check_interval": "2000",
            "plan_cache_mode": "force_custom_plan",
            "enable_seqscan": "off",  # a hot role's (docs/design/claims.md: "Plans that do not rot")
            "jit": "off",  # every role's: no compilation per execution (docs/design/claims.md)
        }


def test_a_pools_connections_carry_the_settings_after_a_reconnect(database_url: str) -> None:
    policy = _policy("relay", relay_statement_timeout_ms=2_345)
    pool = create_pool(database_url, min_size=1, max_size=1, name="policy", policy=policy)
    try:
        with pool.connection() as conn:
            assert _shown(conn)["statement_timeout"] == "2345"
            conn.close()  # the pool replaces a broken connection with a new, configured one
        with pool.connection() as conn:
            assert _shown(conn)["statement_timeout"] == "2345"
            assert conn.info.get_parameters()["keepalives_count"] == "3"
    finally:
        pool.close()


def test_a_user_urls_own_parameters_win(database_url: str) -> None:
    own = database_url + ("&" if "?" in database_url else "?")
    own += "keepalives_idle=42&options=-c%20statement_timeout%3D1234"
    with connect(own, policy=_policy("api")) as conn:
        assert conn.info.get_parameters()["keepalives_idle"] == "42"
        shown = _shown(conn)
        assert shown["statement_timeout"] == "1234"  # from the URL's options, not PIN_API_STATEMENT_TIMEOUT_MS
        assert shown["idle_in_transaction_session_timeout"] == "10000"  # the policy's: the URL does not set it


def test_a_session_idle_in_a_transaction_is_ended_by_the_server(database_url: str) -> None:
    policy = _policy("worker", database_idle_in_transaction_timeout_ms=1_000)
    with connect(database_url, policy=policy) as conn:
        conn.execute("SELECT 1")  # a transaction open, then nothing
        time.sleep(1.5)
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
            conn.execute("SELECT 1")
        assert conn.closed  # the server ended the session: its locks went with it


def test_the_pools_check_gives_up_within_its_timeout(database_url: str) -> None:
    with connect(database_url, autocommit=True) as conn:
        backend = conn.info.backend_pid
        os.kill(backend, signal.SIGSTOP)  # a backend that never answers: what a silent network looks like
        try:
            started = time.monotonic()
            with pytest.raises(psycopg.OperationalError, match="no answer"):
                check_connection(conn, 0.5)
            assert time.monotonic() - started < 1.5
            assert conn.closed  # the pool discards it and opens another
        finally:
            os.kill(backend, signal.SIGCONT)


def test_migrations_apply_with_the_policy(test_databases: object, database_url: str) -> None:
    del test_databases
    migrate(database_url, _policy("migrate"))  # idempotent on a migrated database; the SETs must not break it


def test_the_policys_timeouts_are_infrastructure_never_poison(database_url: str) -> None:
    policy = _policy("consumer", consumer_statement_timeout_ms=200, database_idle_in_transaction_timeout_ms=1_000)
    with connect(database_url, policy=policy) as conn:
        with pytest.raises(psycopg.errors.QueryCanceled) as statement:
            conn.execute("SELECT pg_sleep(2)")
        assert fault_of(statement.value, conn) is Fault.INFRASTRUCTURE
        conn.rollback()
        conn.execute("SELECT 1")
        time.sleep(1.5)
        with pytest.raises(psycopg.Error) as idle:
            conn.execute("SELECT 1")
        assert fault_of(idle.value) is Fault.INFRASTRUCTURE


def test_the_pools_check_refuses_a_session_the_server_ended(database_url: str) -> None:
    with connect(database_url, autocommit=True) as conn, connect(database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
        time.sleep(0.2)
        with pytest.raises(psycopg.OperationalError):
            check_connection(conn, 2.0)
        assert conn.closed


def test_the_apis_sessions_carry_its_lock_timeout_and_no_other_role_does(database_url: str) -> None:
    """The one rule for the API's row-lock waits is one of its session settings (pin.db.ConnectionPolicy)."""
    api = create_pool(
        database_url, min_size=1, max_size=1, name="policy-api", policy=_policy("api", api_lock_timeout_seconds=1.5)
    )
    try:
        with api.connection() as conn:
            assert conn.execute("SHOW lock_timeout").fetchone() == {"lock_timeout": "1500ms"}
    finally:
        api.close()
    with connect(database_url, policy=_policy("worker")) as conn:
        assert conn.execute("SHOW lock_timeout").fetchone() == {"lock_timeout": "0"}


def test_an_api_lock_wait_not_below_the_pool_wait_is_a_configuration_error() -> None:
    with pytest.raises(
        ConfigurationError, match="PIN_API_LOCK_TIMEOUT_SECONDS: must be less than PIN_API_POOL_TIMEOUT_SECONDS"
    ):
        Settings.model_validate({"api_lock_timeout_seconds": 5.0, "api_pool_timeout_seconds": 5.0})
    assert Settings.model_validate({"api_lock_timeout_seconds": 8.0, "api_pool_timeout_seconds": 10.0})


def test_every_role_runs_without_jit_and_only_the_hot_ones_without_sequential_scans(database_url: str) -> None:
    for role in ("api", "command"):
        with connect(database_url, policy=_policy(role)) as conn:
            shown = _shown(conn)
            assert (shown["jit"], shown["enable_seqscan"]) == ("off", "on"), role


def test_a_kept_cursor_is_the_connections_own_until_it_closes(database_url: str) -> None:
    with connect(database_url, autocommit=True) as conn, connect(database_url, autocommit=True) as other:
        text, binary = kept_cursor(conn), kept_cursor(conn, binary=True)
        assert kept_cursor(conn) is text
        assert kept_cursor(conn, binary=True) is binary
        assert text is not binary
        assert kept_cursor(other) is not text  # per connection
        assert text.execute("SELECT 1, 'a'").fetchone() == (1, "a")  # tuple rows
        assert binary.execute("SELECT 1::int4").fetchone() == (1,)
        text.close()
        assert kept_cursor(conn) is not text  # a closed one is replaced
