"""The `pin` command line (SPEC section 9). Exit codes: 0 success, 2 bad usage or configuration, 1 failure."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
import typer.core

from pin.settings import ConfigurationError, Settings, UnreachableError, load_settings

if TYPE_CHECKING:
    from pin.db import Conn

T = TypeVar("T")

app = typer.Typer(
    name="pin",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def version_line() -> str:
    """`pin --version`: the distribution's name and version (its metadata) and the commit it was built from: the
    ``BUILD_COMMIT`` file an image or wheel build writes beside the package (neither has a .git), else the checkout's
    (git; ``-dirty`` with uncommitted changes), else "unknown"."""
    import subprocess
    from importlib.metadata import version

    from pin import distribution

    package = Path(__file__).parent
    built = package / "BUILD_COMMIT"
    if built.is_file():
        commit = built.read_text().strip()
    else:
        git = ["git", "-C", str(package), "describe", "--always", "--dirty", "--abbrev=40", "--exclude=*"]
        try:
            found = subprocess.run(git, capture_output=True, text=True, timeout=5, check=False)  # noqa: S603
        except OSError:  # no git on this machine
            found = None
        commit = found.stdout.strip() if found is not None and found.returncode == 0 else ""
    name = distribution()
    return f"{name} {version(name)} (commit {commit or 'unknown'})"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and the commit, exit.", is_eager=True,
                     callback=_print_version),
    ] = False,
) -> None:  # fmt: skip
    """PIN background jobs and integration events: workers, outbox relay, consumers and HTTP API."""


# `pin worker <name>`: one polling-job instance. Each job adds its command to this group.
worker_app = typer.Typer(help="Run one instance of a polling worker.", no_args_is_help=True)
app.add_typer(worker_app, name="worker")


# `--once` of every worker command: the counters of one cycle on stdout
Once = Annotated[bool, typer.Option(help="Run one cycle, print its counters as JSON, exit.")]


def print_counters(result: dict[str, int] | None) -> None:
    """Print the counters of a `--once` cycle (a worker that ran until a signal prints nothing)."""
    if result is not None:
        print_json(result)


@worker_app.command("expire-promotions")
def expire_promotions(once: Once = False) -> None:
    """Expire Active promotion purchases past their EndsAt (seed 002, UC-PRM-003)."""
    from pin.bootstrap import run_expire_promotions

    print_counters(run_expire_promotions(once=once))


@worker_app.command("appointment-timeout")
def appointment_timeout(once: Once = False) -> None:
    """Expire Pending appointments past their PendingExpiresAt, with the calendar cascade (seed 000)."""
    from pin.bootstrap import run_appointment_timeout

    print_counters(run_appointment_timeout(once=once))


@app.command()
def up(
    demo: Annotated[bool, typer.Option(help="Add sample data that expires within minutes.")] = False,
    port: Annotated[int, typer.Option(help="Port of the HTTP API.")] = 8000,
    host: Annotated[str, typer.Option(help="Address the HTTP API binds to.")] = "127.0.0.1",
) -> None:
    """Run the whole system: database and broker (embedded unless configured), API, workers, relay, consumers."""
    from pin.local.up import run_up

    raise typer.Exit(run_up(demo=demo, host=host, port=port))


@app.command()
def migrate() -> None:
    """Apply the database migrations (idempotent)."""
    from pin.db import ConnectionPolicy
    from pin.db import migrate as apply_migrations

    settings = load_settings()
    apply_migrations(settings.require_database_url(), ConnectionPolicy.from_settings(settings, "migrate"))
    typer.echo("migrations applied")


@app.command()
def topics() -> None:
    """Create the integration topics and the dead-letter topics, if missing (PIN_KAFKA_TOPIC_PARTITIONS partitions)."""
    from pin.messaging.kafka import ensure_topics
    from pin.messaging.topics import all_topics

    settings = load_settings()
    created = ensure_topics(settings)
    for name in all_topics():
        typer.echo(f"{name}: {'created' if name in created else 'exists'}")


@app.command()
def acls(
    apply: Annotated[
        bool, typer.Option("--apply", help="Make the cluster's ACLs of the managed principals these.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """The Kafka ACL bindings every role needs (from who writes and reads each topic); --apply converges the cluster.

    --apply creates what is missing, then deletes the bindings of the principals PIN_KAFKA_PRINCIPAL_* name that are
    not needed (nobody else's), and prints each change. Run it as a cluster administrator. Exit 1 when the broker
    refuses or does not implement the ACL APIs.
    """
    from pin.consumer_groups import group_topics
    from pin.messaging import acls as bindings
    from pin.messaging.groups import topic_table

    settings = load_settings()
    wanted = bindings.required_acls(settings, topic_table(group_topics()))
    if not apply:
        typer.echo(bindings.as_json(wanted) if as_json else bindings.table(wanted))
        return
    from pin.messaging.acl_admin import AclError, apply_acls

    try:
        changes = apply_acls(settings, wanted)
    except AclError as exc:
        typer.echo(f"pin acls: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        print_json({"created": bindings.records(changes.created), "deleted": bindings.records(changes.deleted)})
        return
    for entry in changes.created:
        typer.echo(f"created {entry.line()}")
    for entry in changes.deleted:
        typer.echo(f"deleted {entry.line()}")
    typer.echo(f"{len(changes.created)} created, {len(changes.deleted)} deleted, {len(wanted)} bindings wanted")


@app.command()
def api(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8000,
) -> None:
    """Serve the HTTP API (uvicorn); /metrics is served on the same port."""
    from pin.bootstrap import run_api

    run_api(host=host, port=port)


@app.command()
def relay(
    once: Annotated[bool, typer.Option(help="Publish what is in the outbox now, print the totals, exit.")] = False,
) -> None:
    """One outbox relay instance: publishes outbox rows to Kafka, in order per key (SPEC section 5).

    With --once it takes a fair share of the vparts (all of them when no other relay runs; vparts still leased
    by another instance, or by one killed less than a lease TTL ago, are skipped), publishes what is due there,
    prints the totals as JSON and exits: 0, or 1 when a send failed (the rows stay for a retry).
    """
    from pin.bootstrap import run_relay

    totals = run_relay(once=once)
    if totals is not None:
        print_json(totals)
        if totals["failed"]:
            raise typer.Exit(1)


@app.command()
def consume(
    group: Annotated[str, typer.Argument(help="The consumer group: crm, notifications, catalog or news.")],
) -> None:
    """One consumer instance of a group (SPEC section 7): dedup, retry, dead-letter topic, lag metric."""
    from pin.bootstrap import run_consumer

    run_consumer(group)


# `pin dlq list|replay|park`: the dead-letter topics of the consumer groups.
dlq_app = typer.Typer(help="Inspect and replay dead-lettered messages; park a held one there.", no_args_is_help=True)
app.add_typer(dlq_app, name="dlq")


@dlq_app.command("list")
def dlq_list(
    group: Annotated[str | None, typer.Option(help="Only this consumer group (default: all).")] = None,
    idle_seconds: Annotated[float, typer.Option(help="Stop after this long without a new message.")] = 2.0,
) -> None:
    """Print one JSON line per dead letter (origin, error, attempts); reads from the beginning, commits nothing."""
    from pin.messaging.consumer.dead_letters.command import DeadLetterError, check_group, read_dead_letters
    from pin.messaging.topics import CONSUMER_GROUPS

    settings = load_settings()
    groups = [check_group(group)] if group else list(CONSUMER_GROUPS)
    try:
        letters = read_dead_letters(settings, groups, idle_seconds=idle_seconds)
    except DeadLetterError as exc:
        typer.echo(f"pin dlq list: {exc}", err=True)
        raise typer.Exit(1) from None
    for letter in letters:
        print_json(letter.summary())
    say_count(len(letters), "pin dlq list")
    if not settings.database_url:
        typer.echo("pin dlq list: letters parked in the database not shown (PIN_DATABASE_URL is not set)", err=True)


@dlq_app.command("replay")
def dlq_replay(  # noqa: PLR0917 - typer passes each option by keyword
    group: Annotated[str, typer.Option(help="The consumer group whose dead letters to replay.")],
    message_id: Annotated[str | None, typer.Option(help="Only the dead letter with this MessageId.")] = None,
    key: Annotated[str | None, typer.Option(help="Only the open letters of this key (the index).")] = None,
    reason: Annotated[
        str | None,
        typer.Option(help="Why (recorded in operations.audit): replays the open letters of the index, as the console."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what a replay would do (the index); do nothing.")
    ] = False,
    actor: Annotated[str | None, typer.Option(help="Who replays (default: the OS user).")] = None,
    idle_seconds: Annotated[float, typer.Option(help="Stop reading after this long without a new message.")] = 2.0,
) -> None:
    """Publish dead letters back to their original topics (same key, value and headers, so the same MessageId).

    With --dry-run or --reason it works on the open letters of the database's index, as the console does (a dry
    run counts those the group would apply, skip as already applied, refuse as stale; a replay marks them
    replayed on the audit trail). Without either it reads the dead-letter topic (letters from before the index).
    """
    from pin.messaging.consumer.dead_letters.command import DeadLetterError, check_group, replay

    settings = load_settings()
    if dry_run or reason is not None:
        _replay_indexed(settings, check_group(group), message_id, key, reason=reason, actor=actor, dry_run=dry_run)
        return
    try:
        replayed = replay(settings, check_group(group), message_id=message_id, idle_seconds=idle_seconds)
    except DeadLetterError as exc:
        typer.echo(f"pin dlq replay: {exc}", err=True)
        raise typer.Exit(1) from None
    print_json({"group": group, "replayed": len(replayed), "messageIds": [letter.message_id for letter in replayed]})
    if message_id is not None and not replayed:
        raise typer.Exit(1)


def _replay_indexed(
    settings: Settings,
    group: str,
    message_id: str | None,
    key: str | None,
    *,
    reason: str | None,
    actor: str | None,
    dry_run: bool,
) -> None:
    """`pin dlq replay --dry-run | --reason`: the console's replay of the indexed letters (pin.console.actions)."""
    from pin.console import actions
    from pin.db import ConnectionPolicy, connect
    from pin.messaging.consumer.dead_letters.index import LetterFilter
    from pin.operations.audit import default_actor

    if not dry_run and not (reason or "").strip():
        raise ConfigurationError("pin dlq replay: --reason must say why")
    where = LetterFilter(group=group, key=key, message_id=_uuid_option(message_id, "--message-id"))
    policy = ConnectionPolicy.from_settings(settings, "command")
    with connect(settings.require_database_url(), policy=policy) as conn:
        try:
            letters = actions.select_group_letters(conn, where)
            if dry_run:
                print_json({"group": group, "dryRun": True, **actions.preview_group(conn, letters).counts()})
                return
            said = actions.Said(actor or default_actor(), str(reason), {"kind": "group", "filter": where.described()})
            record, preview = actions.replay_group(conn, settings, letters, said)
        except actions.ActionError as exc:
            typer.echo(f"pin dlq replay: {exc}", err=True)
            raise typer.Exit(1) from None
    print_json({"group": group, "auditId": record.id, **preview.counts()})


@dlq_app.command("discard")
def dlq_discard(
    group: Annotated[str, typer.Option(help="The consumer group whose dead letters to discard.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in operations.audit).")],
    message_id: Annotated[str | None, typer.Option(help="Only the dead letter with this MessageId.")] = None,
    key: Annotated[str | None, typer.Option(help="Only the open letters of this key.")] = None,
    actor: Annotated[str | None, typer.Option(help="Who discards (default: the OS user).")] = None,
) -> None:
    """Mark open dead letters of a group discarded (kept in the index, hidden by default), on the audit trail."""
    from pin.console import actions
    from pin.db import ConnectionPolicy, connect
    from pin.messaging.consumer.dead_letters.command import check_group
    from pin.messaging.consumer.dead_letters.index import LetterFilter
    from pin.operations.audit import default_actor

    if not reason.strip():
        raise ConfigurationError("pin dlq discard: --reason must say why")
    settings = load_settings()
    where = LetterFilter(group=check_group(group), key=key, message_id=_uuid_option(message_id, "--message-id"))
    with connect(settings.require_database_url(), policy=ConnectionPolicy.from_settings(settings, "command")) as conn:
        try:
            letters = actions.select_group_letters(conn, where)
            said = actions.Said(actor or default_actor(), reason, {"kind": "group", "filter": where.described()})
            record = actions.discard_group(conn, letters, said)
        except actions.ActionError as exc:
            typer.echo(f"pin dlq discard: {exc}", err=True)
            raise typer.Exit(1) from None
    print_json({"group": group, "auditId": record.id, "discarded": len(letters)})


def _uuid_option(value: str | None, option: str) -> uuid.UUID | None:
    """A UUID option, or a configuration error naming it."""
    try:
        return uuid.UUID(value) if value is not None else None
    except ValueError:
        raise ConfigurationError(f"{option}: not a UUID") from None


Kind = Annotated[str, typer.Argument(help="job (a polling worker) or group (a consumer group).")]
Name = Annotated[
    str, typer.Argument(help="appointment-timeout, expire-promotions, or crm, notifications, catalog, news.")
]
Why = Annotated[str, typer.Option(help="Why (recorded in operations.audit; shown on every console page).")]
Actor = Annotated[str | None, typer.Option(help="Who (default: the OS user).")]


@app.command()
def pause(kind: Kind, name: Name, reason: Why, actor: Actor = None) -> None:
    """Pause a worker job or a consumer group for the whole cluster: every instance stops taking work within 5 s."""
    _pause_or_resume(kind, name, "pause", reason, actor)


@app.command()
def resume(kind: Kind, name: Name, reason: Why, actor: Actor = None) -> None:
    """Resume a paused worker job or consumer group (every instance within 5 s)."""
    _pause_or_resume(kind, name, "resume", reason, actor)


def _pause_or_resume(kind: str, name: str, action: str, reason: str, actor: str | None) -> None:
    from pin.console import actions
    from pin.db import ConnectionPolicy, connect
    from pin.operations.audit import default_actor

    if not reason.strip():
        raise ConfigurationError(f"pin {action}: --reason must say why")
    settings = load_settings()
    with connect(settings.require_database_url(), policy=ConnectionPolicy.from_settings(settings, "command")) as conn:
        try:
            changed = actions.pause_or_resume(
                conn, kind=kind, name=name, action=action, actor=actor or default_actor(), reason=reason
            )
        except actions.ActionError as exc:
            raise ConfigurationError(f"pin {action}: {exc}") from None
        conn.commit()
    print_json({"kind": kind, "name": name, "action": action, "changed": changed})


@dlq_app.command("park")
def dlq_park(  # noqa: PLR0917 - typer passes each option by keyword
    group: Annotated[str, typer.Option(help="The consumer group holding the message.")],
    topic: Annotated[str, typer.Option(help="The topic the message was read from.")],
    reason: Annotated[str, typer.Option(help="Why it will never apply (recorded in operations.audit).")],
    partition: Annotated[int | None, typer.Option(help="Its partition (with --offset; optional with --key).")] = None,
    offset: Annotated[int | None, typer.Option(help="Its offset (with --partition).")] = None,
    key: Annotated[str | None, typer.Option(help="Its key, instead of the offset.")] = None,
    actor: Annotated[str | None, typer.Option(help="Who parks it (default: the OS user).")] = None,
    wait_seconds: Annotated[float, typer.Option(help="How long to wait for its holder to dead-letter it.")] = 60.0,
) -> None:
    """Move a message held in retry to its group's dead letters, on the record (who, when, why)."""
    from pin.messaging.consumer.dead_letters.command import check_group
    from pin.messaging.consumer.dead_letters.park import ParkError, ParkTarget, park
    from pin.operations.audit import default_actor

    settings = load_settings()
    target = ParkTarget(check_group(group), topic, partition=partition, offset=offset, key=key)
    try:
        parked = park(settings, target, actor=actor or default_actor(), reason=reason, wait_seconds=wait_seconds)
    except ParkError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    print_json(parked.as_json())
    if parked.still_held:
        typer.echo(
            f"pin dlq park: {parked.still_held} message(s) marked and still held: the consumer holding each"
            " dead-letters it at its next attempt (none runs now, or its back-off is longer than the wait)",
            err=True,
        )


@app.command()
def status(
    watch: Annotated[bool, typer.Option("--watch", help="Refresh in place until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option(help="Seconds between refreshes with --watch.", min=0.5)] = 2.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the snapshot as one JSON document.")] = False,
    kafka: Annotated[bool, typer.Option(help="Ask the broker for consumer offsets and dead-letter counts.")] = True,
    demo: Annotated[
        bool, typer.Option("--demo", help="Print what the running `pin up` printed: where things are, demo tokens.")
    ] = False,
) -> None:
    """Backlogs, lags and last cycles for an operator: workers, outbox, relays, consumer groups (n/a when unknown)."""
    from pin.status import run_status

    settings = load_settings()
    if demo:
        from pin.settings import running_banner, state_folder_of

        home = state_folder_of(settings.home)
        banner = running_banner(home)
        if banner is None:
            raise ConfigurationError(f"no `pin up` is running in {home}: start one (`pin up --demo`), or set PIN_HOME")
        typer.echo(banner, nl=False)
        return
    if not settings.database_url:  # every cell would be n/a: say what to do instead
        raise ConfigurationError(
            "no database to report on: start `pin up` (pin status then finds it in the state folder), "
            "or set PIN_DATABASE_URL, or PIN_HOME to the state folder of a running `pin up`"
        )
    raise typer.Exit(run_status(settings, watch=watch, interval=interval, as_json=as_json, kafka=kafka))


# `pin outbox dead-letters ...`: operator actions on rows the relay moved aside.
outbox_app = typer.Typer(help="The transactional outbox: its dead letters.", no_args_is_help=True)
dead_letters_app = typer.Typer(help="Rows the broker will never accept; each holds back its key.", no_args_is_help=True)
outbox_app.add_typer(dead_letters_app, name="dead-letters")
app.add_typer(outbox_app, name="outbox")


@dead_letters_app.command("list")
def dead_letters_list_command(
    limit: Annotated[int, typer.Option(help="At most this many, oldest first.")] = 100,
) -> None:
    """List dead letters (ids, topic, key, error, rows held back behind them; never payloads) as JSON lines."""
    from pin.db import ConnectionPolicy, connect
    from pin.outbox.dead_letters import dead_letters_list

    settings = load_settings()
    with connect(settings.require_database_url(), policy=ConnectionPolicy.from_settings(settings, "command")) as conn:
        letters = dead_letters_list(conn, limit)
    for letter in letters:
        print_json(letter)
    say_count(len(letters), "pin outbox dead-letters list")


@dead_letters_app.command("replay")
def dead_letters_replay_command(
    reason: Annotated[str, typer.Option(help="Why (recorded in operations.audit).")],
    message_id: Annotated[uuid.UUID | None, typer.Argument(help="The MessageId to replay.")] = None,
    replay_all: Annotated[bool, typer.Option("--all", help="Replay every dead letter.")] = False,
    topic: Annotated[str | None, typer.Option(help="The letter's topic (a MessageId with letters on two).")] = None,
    actor: Annotated[str | None, typer.Option(help="Who replays (default: the OS user).")] = None,
) -> None:
    """Put a dead letter back at the head of its key in the outbox (after fixing its cause), on the audit trail."""
    from pin.console import actions

    if (message_id is None) == (not replay_all):
        raise ConfigurationError("give a MESSAGE_ID or --all")
    record, replayed = _on_relay_letters(
        "replay", reason=reason, actor=actor, message_id=message_id, topic=topic,
        act=lambda conn, settings, said: actions.replay_relay_named(conn, settings, message_id, topic, said),
    )  # fmt: skip
    if message_id is not None and not replayed:
        print(f"pin: no dead letter {message_id}", file=sys.stderr)
        raise typer.Exit(1)
    print_json({"replayed": [str(item) for item in replayed], "auditId": record.id if record else None})


@dead_letters_app.command("discard")
def dead_letters_discard_command(
    message_id: Annotated[uuid.UUID, typer.Argument(help="The MessageId to discard.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in operations.audit).")],
    topic: Annotated[str | None, typer.Option(help="The letter's topic (a MessageId with letters on two).")] = None,
    actor: Annotated[str | None, typer.Option(help="Who discards (default: the OS user).")] = None,
) -> None:
    """Discard a dead letter (kept in outbox.dead_letter_discarded), on the audit trail; the later rows of its key
    are then published."""
    from pin.console import actions

    record = _on_relay_letters(
        "discard", reason=reason, actor=actor, message_id=message_id, topic=topic,
        act=lambda conn, _settings, said: actions.discard_relay_named(conn, message_id, topic, said),
    )  # fmt: skip
    if record is None:
        print(f"pin: no dead letter {message_id}", file=sys.stderr)
        raise typer.Exit(1)
    print_json({"discarded": str(message_id), "auditId": record.id})


def _on_relay_letters(
    verb: str,
    *,
    reason: str,
    actor: str | None,
    message_id: uuid.UUID | None,
    topic: str | None,
    act: Callable[[Conn, Settings, Any], T],
) -> T:
    """`pin outbox dead-letters VERB`: ``act`` on one connection, as ``actor`` for ``reason`` (required: recorded in
    operations.audit with the letter named); a MessageId of letters on several topics without ``topic`` refused."""
    from pin.console import actions
    from pin.db import ConnectionPolicy, connect
    from pin.operations.audit import default_actor
    from pin.outbox.dead_letters import AmbiguousMessageIdError

    if not reason.strip():
        raise ConfigurationError(f"pin outbox dead-letters {verb}: --reason must say why")
    settings = load_settings()
    named: dict[str, object] = {"kind": "relay", "message_id": str(message_id) if message_id else "all"}
    said = actions.Said(actor or default_actor(), reason.strip(), named | ({"topic": topic} if topic else {}))
    with connect(settings.require_database_url(), policy=ConnectionPolicy.from_settings(settings, "command")) as conn:
        try:
            return act(conn, settings, said)
        except AmbiguousMessageIdError as exc:
            raise ConfigurationError(str(exc)) from None


@app.command()
def token(
    user: Annotated[uuid.UUID, typer.Option(help="The user id (sub claim).")],
    tenant: Annotated[uuid.UUID, typer.Option(help="The tenant id (tenant_id claim).")],
    role: Annotated[
        list[str],
        typer.Option(help="A role: agent, investor, manager, admin, or viewer/operator for the console (repeatable)."),
    ],
    ttl: Annotated[int, typer.Option(help="Lifetime in seconds.")] = 3600,
) -> None:
    """Mint a development token signed with PIN_JWT_SECRET (HS256)."""
    from pin.api.auth import Role, mint_token

    settings = load_settings()
    if settings.jwt_secret is None:
        raise ConfigurationError("PIN_JWT_SECRET is not set")
    unknown = [name for name in role if name not in Role._value2member_map_]
    if unknown:
        raise ConfigurationError(f"--role: unknown role {unknown[0]!r} ({', '.join(Role)})")
    if not 0 < ttl <= settings.jwt_max_lifetime_seconds:
        # the API refuses a token that lives longer: say so now rather than mint one that never works
        limit = settings.jwt_max_lifetime_seconds
        raise ConfigurationError(f"--ttl: between 1 and PIN_JWT_MAX_LIFETIME_SECONDS ({limit})")
    typer.echo(
        mint_token(settings.jwt_secret.get_secret_value(), user_id=user, tenant_id=tenant, roles=role, ttl_seconds=ttl)
    )


def say_count(count: int, command: str) -> None:
    """How many dead letters a list printed, on stderr (stdout keeps only the JSON lines): "0" is an answer too."""
    typer.echo(f"{command}: {count} dead letter{'' if count == 1 else 's'}", err=True)


def print_json(data: object) -> None:
    """Print one JSON document on stdout (the `--once` results)."""
    typer.echo(json.dumps(data, default=str, sort_keys=True))


def command() -> typer.core.TyperGroup:
    """The click command of ``app``, its flags shown without a value placeholder: typer's help prints one for every
    option, and a flag (--json, --once) takes no value, so `<bool>` beside it would tell a reader to give one."""
    built = typer.main.get_command(app)
    assert isinstance(built, typer.core.TyperGroup)
    pending: list[object] = [built]
    while pending:
        current = pending.pop()
        for param in getattr(current, "params", []):
            if isinstance(param, typer.core.TyperOption) and param.is_flag:
                param.metavar = ""
        if isinstance(current, typer.core.TyperCommand | typer.core.TyperGroup):
            current.get_help_option = _flag_help_option(current.get_help_option)  # type: ignore[method-assign,assignment]
        if isinstance(current, typer.core.TyperGroup):
            pending.extend(current.commands.values())
    return built


def _flag_help_option(make: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """--help is built per invocation: the same blank placeholder for it."""

    def made(ctx: Any) -> Any:
        option = make(ctx)
        if option is not None:
            option.metavar = ""
        return option

    return made


def main() -> None:
    """Entry point: configuration errors become one line on stderr and exit code 2."""
    try:
        # without standalone mode, click returns (not raises) the code of a `raise typer.Exit(code)`
        code = command()(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except ConfigurationError as exc:
        print(f"pin: configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
    except UnreachableError as exc:
        print(f"pin: {' '.join(str(exc).split())}", file=sys.stderr)  # one line: libpq's messages span several
        sys.exit(1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except Exception as exc:
        # usage errors (typer's vendored click.UsageError) print one message and exit 2, no stack trace
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code"):
            show()
            sys.exit(2)
        raise
