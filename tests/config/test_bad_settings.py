"""Every setting's bad value stops `pin <role>` at start with exit code 2 and one line naming the variable.

Each case is a process of its own: a fork of one driver process that imported `pin.cli` once
(tests/support/fork_cli.py; a Python start-up per case cost ~35 s of the suite), running the same `pin.cli.main`
as `python -m pin`; one case also runs as a real `python -m pin` to show both agree. The rest of the environment is
valid (a database URL that nothing listens on: a role that got past its configuration would hang or fail
differently, and the case would fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pin.local.tcp_ports import free_port
from tests.conftest import JWT_SECRET

pytestmark = [pytest.mark.integration]

WORKER = ("worker", "expire-promotions", "--once")
TIMEOUT_WORKER = ("worker", "appointment-timeout", "--once")
RELAY = ("relay", "--once")
API = ("api", "--port", "0")
CONSUME = ("consume", "crm")

# (variable, bad value, role) - the role is one that reads the variable
CASES = [
    ("PIN_KAFKA_SESSION_TIMEOUT_MS", "abc", WORKER),
    ("PIN_KAFKA_SESSION_TIMEOUT_MS", "10", WORKER),
    ("PIN_KAFKA_MAX_MESSAGE_BYTES", "100", CONSUME),
    ("PIN_KAFKA_MAX_MESSAGE_BYTES", "1MB", CONSUME),
    ("PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS", "0", CONSUME),
    ("PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS", "fast", CONSUME),
    ("PIN_KAFKA_TOPIC_PARTITIONS", "0", RELAY),
    ("PIN_KAFKA_TOPIC_PARTITIONS", "many", RELAY),
    ("PIN_KAFKA_CLIENT_CONFIG", "security.protocol", RELAY),
    ("PIN_KAFKA_CLIENT_CONFIG", "=x", RELAY),
    ("PIN_JWT_SECRET", "short", API),
    ("PIN_APPOINTMENT_PENDING_TTL_SECONDS", "0", TIMEOUT_WORKER),
    ("PIN_APPOINTMENT_PENDING_TTL_SECONDS", "a day", API),
    ("PIN_APPOINTMENT_CANCEL_CUTOFF_MINUTES", "-1", API),
    ("PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS", "0", TIMEOUT_WORKER),
    ("PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS", "soon", TIMEOUT_WORKER),
    ("PIN_APPOINTMENT_TIMEOUT_BATCH_SIZE", "0", TIMEOUT_WORKER),
    ("PIN_APPOINTMENT_TIMEOUT_BATCH_SIZE", "20000", TIMEOUT_WORKER),
    ("PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS", "-5", WORKER),
    # the bounds the seeds set (pin.settings): a tick 1 to 60 s apart (appointment-timeout's SLO is t + 60 s + one
    # cycle), 1 s to 5 min (expire-promotions), a cycle's budget at most 30 s
    ("PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS", "0.5", TIMEOUT_WORKER),
    ("PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS", "61", TIMEOUT_WORKER),
    ("PIN_APPOINTMENT_TIMEOUT_CYCLE_BUDGET_SECONDS", "31", TIMEOUT_WORKER),
    ("PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS", "0.5", WORKER),
    ("PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS", "86400", WORKER),
    ("PIN_EXPIRE_PROMOTIONS_CYCLE_BUDGET_SECONDS", "500", WORKER),
    ("PIN_EXPIRE_PROMOTIONS_BATCH_SIZE", "x", WORKER),
    ("PIN_METRICS_PORT", "70000", WORKER),
    ("PIN_METRICS_PORT", "http", WORKER),
    ("PIN_LOG_LEVEL", "LOUD", WORKER),
    ("PIN_LOG_FORMAT", "xml", WORKER),
    ("PIN_RELAY_BATCH_SIZE", "many", RELAY),
    ("PIN_RELAY_BATCH_SIZE", "0", RELAY),
    ("PIN_RELAY_LEASE_TTL_SECONDS", "0.5", RELAY),
    ("PIN_RELAY_TEST_FAULT", "explode", RELAY),
    ("PIN_OUTBOX_MODE", "debezium", WORKER),
    ("PIN_OUTBOX_MODE", "cdc", RELAY),  # a good value, but the relay must not run in cdc mode
    ("PIN_OUTBOX_MODE", "cdc", ("up",)),  # nor `pin up`, which runs a relay and no Debezium
    ("PIN_OUTBOX_CDC_SLOT", "Bad-Slot", WORKER),
    ("PIN_DATABASE_URL", "", WORKER),
    ("PIN_KAFKA_BOOTSTRAP_SERVERS", "", RELAY),
    ("PIN_JWT_PUBLIC_KEY", "not a PEM key", API),
    ("PIN_JWT_MAX_LIFETIME_SECONDS", "0", API),
    ("PIN_JWT_MAX_LIFETIME_SECONDS", "forever", API),
    ("PIN_HTTP_MAX_HEADER_BYTES", "1024", API),
]


def run_pin(args: tuple[str, ...], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m pin <args>` with exactly ``env`` over a clean PIN_-free environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PIN_")}
    return subprocess.run(
        [sys.executable, "-m", "pin", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def valid_env() -> dict[str, str]:
    """A complete, valid configuration whose database and broker do not answer."""
    return {
        "PIN_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{free_port()}/none?connect_timeout=2",
        "PIN_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",
        "PIN_JWT_SECRET": JWT_SECRET,
        "PIN_LOG_FORMAT": "json",
    }


def case_env(name: str, value: str) -> dict[str, str]:
    """The whole environment of a case: a valid configuration with ``name=value`` ("" means unset)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PIN_")}
    env = valid_env()
    if value == "":
        env.pop(name)
    else:
        env[name] = value
    return {**base, **env}


def judge(case: tuple[str, str, tuple[str, ...]], code: int | None, stdout: str, stderr: str) -> str | None:
    """None when the run exited 2 with one line on stderr naming ``name`` and no stack trace; else what happened."""
    name, value, role = case
    label = f"`pin {' '.join(role)}` with {name}={value!r}"
    if code is None:
        return f"{label} did not exit: it accepted the bad value"
    lines = [line for line in stderr.splitlines() if line.strip()]
    if code != 2:
        return f"{label} exited {code}: {stderr[-500:]}"
    if len(lines) != 1 or name not in lines[0]:
        return f"{label} did not print one line naming the variable: {stderr[-500:]}"
    if "Traceback" in stderr + stdout:
        return f"{label} printed a stack trace"
    return None


def run_forked(cases: list[tuple[str, str, tuple[str, ...]]]) -> list[dict[str, object]]:
    """Every case as a fork of one driver process (4 at a time); its exit code, stdout and stderr."""
    payload = [[list(role), case_env(name, value), 60] for name, value, role in cases]
    driver = subprocess.run(
        [sys.executable, "-m", "tests.support.fork_cli", "--parallel", "4"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert driver.returncode == 0, driver.stderr[-2000:]
    results: list[dict[str, object]] = json.loads(driver.stdout)
    return results


def test_every_bad_value_exits_2_with_one_line_naming_the_variable() -> None:
    """Exit code 2, exactly one line on stderr, naming the variable, no stack trace (cases run 4 at a time);
    the first and last cases also run as a real `python -m pin` beside the driver, with the same outcome."""
    real = {
        case: subprocess.Popen(
            [sys.executable, "-m", "pin", *case[2]],
            env=case_env(case[0], case[1]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for case in (CASES[0], CASES[-1])
    }
    try:
        results = run_forked(CASES)
    finally:
        finished = {case: (process.communicate(timeout=60), process.returncode) for case, process in real.items()}
    outcomes = [
        judge(case, result["code"], str(result["stdout"]), str(result["stderr"]))  # type: ignore[arg-type]
        for case, result in zip(CASES, results, strict=True)
    ]
    for case, ((stdout, stderr), code) in finished.items():
        outcomes.append(judge(case, code, stdout, stderr))
        forked = results[CASES.index(case)]
        if (forked["code"], forked["stderr"]) != (code, stderr):
            outcomes.append(f"the fork and `python -m pin` disagree on {case[:2]}: {forked} vs {code} {stderr}")
    failures = [outcome for outcome in outcomes if outcome is not None]
    assert not failures, "\n".join(failures)


def test_an_unknown_consumer_group_exits_2() -> None:
    """`pin consume nosuchgroup`: a configuration error, one line."""
    result = run_pin(("consume", "nosuchgroup"), valid_env())
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1
    assert "nosuchgroup" in lines[0]
