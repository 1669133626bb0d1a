"""`pin acls`: the ACL bindings derived from who writes and reads each topic, and a cluster converging to them.

The derivation and the convergence's AdminClient calls are unit tests (the AdminClient behind a fake of its port);
the refusal of a broker without the ACL APIs runs against the real embedded broker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pin import consumer_groups
from pin.contract_check import CONTRACT_SETS
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging import acls, groups, topics
from pin.messaging.acls import AclEntry, converge, managed_principals, required_acls
from pin.messaging.kafka import consumer_config, producer_config
from pin.settings import Settings

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _settings(**values: Any) -> Settings:
    return Settings.model_validate({"kafka_bootstrap_servers": "127.0.0.1:9", **values})


def _table() -> tuple[groups.TopicAccess, ...]:
    """Who writes and reads each topic, from the groups' route tables (as `pin acls` asks the composition root)."""
    return groups.topic_table(consumer_groups.group_topics())


def _grants(entries: Iterable[AclEntry], principal: str) -> set[tuple[str, str, str]]:
    """(operation, resource type, resource name) of ``principal``'s bindings."""
    return {(e.operation, e.resource_type, e.resource_name) for e in entries if e.principal == principal}


# -- derived from the table ---------------------------------------------------------------------------------------


@pytest.mark.unit
def test_each_group_reads_its_routes_and_its_group_and_writes_only_its_dead_letter_topic() -> None:
    wanted = required_acls(_settings(), _table())
    for group in topics.CONSUMER_GROUPS:
        expected = {("READ", "TOPIC", topic) for topic in consumer_groups.topics_of(group)}
        expected |= {("READ", "GROUP", consumer_config(_settings(), group)["group.id"])}
        expected |= {("WRITE", "TOPIC", topics.dead_letter_topic(group))}
        expected |= {("IDEMPOTENT_WRITE", "CLUSTER", acls.CLUSTER_NAME)}  # its dead-letter producer
        assert _grants(wanted, f"User:pin-{group}") == expected, group


@pytest.mark.unit
def test_the_relay_writes_exactly_the_contracts_topics_and_describes_every_group() -> None:
    wanted = required_acls(_settings(), _table())
    # the outbox writer gives each row its contract's topic: the contracts publish exactly the integration topics,
    # so `pin topics` creates every topic the relay writes
    published = {contract.TOPIC for documents in CONTRACT_SETS for contract in documents.contracts}
    assert published == set(topics.INTEGRATION_TOPICS)
    expected = {("WRITE", "TOPIC", t) for t in published} | {("IDEMPOTENT_WRITE", "CLUSTER", acls.CLUSTER_NAME)}
    # OffsetFetch of every group, even one that runs nowhere: what waits for it (pin/outbox/waiting.py); never READ,
    # so it can neither join nor commit
    expected |= {("DESCRIBE", "GROUP", consumer_config(_settings(), g)["group.id"]) for g in topics.CONSUMER_GROUPS}
    assert _grants(wanted, "User:pin-relay") == expected
    assert producer_config(_settings())["enable.idempotence"] is True  # why IDEMPOTENT_WRITE is needed


@pytest.mark.unit
def test_the_operator_creates_every_topic_replays_to_the_read_ones_and_only_describes_groups() -> None:
    operator = _grants(required_acls(_settings(), _table()), "User:pin-operator")
    assert {name for op, kind, name in operator if op == "CREATE"} == set(topics.all_topics())
    read_by_a_group = {t for g in topics.CONSUMER_GROUPS for t in consumer_groups.topics_of(g)}
    assert {name for op, _, name in operator if op == "WRITE"} == read_by_a_group
    assert {name for op, _, name in operator if op == "READ"} == {
        topics.dead_letter_topic(g) for g in topics.CONSUMER_GROUPS
    }
    assert {op for op, kind, _ in operator if kind == "GROUP"} == {"DESCRIBE"}  # never joins or commits


@pytest.mark.unit
def test_adding_a_route_adds_its_read(monkeypatch: pytest.MonkeyPatch) -> None:
    before = required_acls(_settings(), _table())
    crm_topics = consumer_groups.topics_of("crm")
    assert topics.APPOINTMENT_CONFIRMED not in crm_topics
    real = consumer_groups.topics_of
    monkeypatch.setattr(
        consumer_groups, "topics_of", lambda g: (*crm_topics, topics.APPOINTMENT_CONFIRMED) if g == "crm" else real(g)
    )
    after = required_acls(_settings(), _table())
    assert set(after) - set(before) == {
        AclEntry("User:pin-crm", "TOPIC", topics.APPOINTMENT_CONFIRMED, "LITERAL", "READ")
    }


@pytest.mark.unit
def test_a_describe_that_a_read_or_write_implies_is_not_granted() -> None:
    table = [groups.TopicAccess("t.read-by-nobody", ("relay",), ())]
    operator = _grants(required_acls(_settings(), table), "User:pin-operator")
    assert ("DESCRIBE", "TOPIC", "t.read-by-nobody") in operator  # `pin status` needs it, nothing implies it
    dlq = topics.dead_letter_topic("crm")
    assert ("DESCRIBE", "TOPIC", dlq) not in _grants(
        required_acls(_settings(), _table()), "User:pin-operator"
    )  # READ does


@pytest.mark.unit
def test_the_principals_come_from_the_settings() -> None:
    settings = _settings(kafka_principal_relay="User:relay-prod", kafka_principal_operator="User:ops")
    principals = {e.principal for e in required_acls(settings, _table())}
    assert principals == managed_principals(settings)
    assert {"User:relay-prod", "User:ops"} <= principals
    assert "User:pin-relay" not in principals


@pytest.mark.unit
@pytest.mark.parametrize("value", ["pin-relay", "User:", ":x", " User:x"])
def test_a_principal_without_a_type_is_a_configuration_error(value: str) -> None:
    with pytest.raises(ValueError, match="Kafka principal"):
        _settings(kafka_principal_relay=value)


@pytest.mark.unit
def test_the_table_in_the_operations_doc_is_the_derived_one() -> None:
    assert acls.markdown(required_acls(_settings(), _table())) in OPERATIONS.read_text(encoding="utf-8")


# -- converging: the AdminClient calls for a given state ------------------------------------------------------------


class FakeAclAdmin:
    """The AdminClient's ACL port over a set of bindings, recording each call."""

    def __init__(self, current: Iterable[AclEntry]) -> None:
        self.bindings = set(current)
        self.calls: list[tuple[str, tuple[AclEntry, ...]]] = []

    def describe(self) -> list[AclEntry]:
        self.calls.append(("describe", ()))
        return sorted(self.bindings)

    def create(self, entries: Sequence[AclEntry]) -> None:
        self.calls.append(("create", tuple(entries)))
        self.bindings |= set(entries)

    def delete(self, entries: Sequence[AclEntry]) -> None:
        self.calls.append(("delete", tuple(entries)))
        self.bindings -= set(entries)


def _entry(principal: str, operation: str, topic: str) -> AclEntry:
    return AclEntry(principal, "TOPIC", topic, "LITERAL", operation)


@pytest.mark.unit
def test_an_empty_cluster_gets_every_binding_in_one_create() -> None:
    settings = _settings()
    wanted = required_acls(settings, _table())
    admin = FakeAclAdmin([])
    changes = converge(admin, wanted, managed_principals(settings))
    assert admin.calls == [("describe", ()), ("create", wanted)]
    assert changes.created == wanted
    assert changes.deleted == ()
    assert all(entry.reason for entry in changes.created)  # the report says why each one is there


@pytest.mark.unit
def test_a_second_run_describes_and_changes_nothing() -> None:
    settings = _settings()
    wanted = required_acls(settings, _table())
    admin = FakeAclAdmin(wanted)
    changes = converge(admin, wanted, managed_principals(settings))
    assert admin.calls == [("describe", ())]
    assert (changes.created, changes.deleted) == ((), ())


@pytest.mark.unit
def test_only_the_managed_principals_extra_bindings_are_deleted_after_the_missing_ones_are_created() -> None:
    settings = _settings()
    wanted = required_acls(settings, _table())
    missing = wanted[0]
    extra = _entry("User:pin-crm", "WRITE", topics.APPOINTMENT_CANCELLED)  # a group writing an integration topic
    denied = AclEntry("User:pin-relay", "TOPIC", "pin.", "PREFIXED", "DELETE", permission="DENY")
    foreign = [_entry("User:billing", "READ", topics.APPOINTMENT_CANCELLED), _entry("User:billing", "WRITE", "bills")]
    admin = FakeAclAdmin([*wanted[1:], extra, denied, *foreign])

    changes = converge(admin, wanted, managed_principals(settings))

    assert admin.calls == [("describe", ()), ("create", (missing,)), ("delete", tuple(sorted([extra, denied])))]
    assert admin.bindings == {*wanted, *foreign}
    assert changes.created == (missing,)
    assert changes.deleted == tuple(sorted([extra, denied]))


@pytest.mark.unit
def test_the_adapter_sends_each_binding_as_it_is_and_reads_it_back_the_same() -> None:
    from confluent_kafka.admin import ResourceType

    from pin.messaging.acl_admin import _binding_of, _entry_of, _filter_of

    wanted = required_acls(_settings(), _table())
    assert [_entry_of(_binding_of(entry)) for entry in wanted] == list(wanted)
    assert [_entry_of(_filter_of(entry)) for entry in wanted] == list(wanted)  # DeleteAcls matches only that one
    cluster = next(e for e in wanted if e.resource_type == "CLUSTER")
    assert _binding_of(cluster).restype == ResourceType.BROKER  # librdkafka's name of Kafka's CLUSTER resource


@pytest.mark.unit
def test_apply_probes_with_the_first_missing_binding_and_stops_when_the_probe_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pin.messaging import acl_admin

    settings = _settings()
    wanted = required_acls(settings, _table())
    admin = FakeAclAdmin([])
    probed: list[AclEntry] = []
    monkeypatch.setattr(acl_admin, "KafkaAclAdmin", lambda settings, timeout: admin)

    def refuse(entry: AclEntry, timeout: float) -> None:
        probed.append(entry)
        raise acl_admin.AclError("the broker does not implement the ACL APIs")

    monkeypatch.setattr(acl_admin, "_probe_create", refuse)
    with pytest.raises(acl_admin.AclError):
        acl_admin.apply_acls(settings, wanted)
    assert probed == [wanted[0]]
    assert admin.calls == [("describe", ())]  # nothing sent by this process

    monkeypatch.setattr(acl_admin, "_probe_create", lambda entry, timeout: admin.create([entry]))
    changes = acl_admin.apply_acls(settings, wanted)
    assert changes.created == wanted  # the probe's binding is reported with the others
    assert admin.bindings == set(wanted)


# -- the command ------------------------------------------------------------------------------------------------


def _pin(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PIN_")}
    return subprocess.run(
        [sys.executable, "-m", "pin", *args],
        env={**base, "PIN_HOME": str(tmp_path / "home"), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.unit
def test_pin_acls_prints_the_bindings_as_a_table_and_as_json(tmp_path: Path) -> None:
    wanted = required_acls(_settings(kafka_principal_news="User:newsroom"), _table())
    env = {"PIN_KAFKA_PRINCIPAL_NEWS": "User:newsroom"}
    as_json = _pin(["acls", "--json"], env, tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    assert [AclEntry(**item) for item in json.loads(as_json.stdout)] == list(wanted)
    shown = _pin(["acls"], env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == acls.table(wanted) + "\n"
    assert "User:newsroom" in shown.stdout


@pytest.mark.integration
def test_apply_against_a_broker_without_the_acl_apis_refuses_in_one_line(kafka: EmbeddedKafka, tmp_path: Path) -> None:
    """The embedded broker answers DescribeAcls with an empty success; its CreateAcls answer aborts librdkafka."""
    started = time.monotonic()
    result = _pin(["acls", "--apply"], {"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}, tmp_path)
    assert result.returncode == 1, (result.returncode, result.stderr)  # refused: not aborted (-6), not a crash
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("pin acls: the broker does not implement the ACL APIs"), line
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 60


@pytest.mark.unit
def test_apply_prints_each_change_and_a_count(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pin.cli import app
    from pin.messaging import acl_admin

    created = _entry("User:pin-crm", "READ", topics.APPOINTMENT_CREATED)
    deleted = _entry("User:pin-crm", "WRITE", topics.APPOINTMENT_CANCELLED)
    changes = acls.AclChanges(created=(created,), deleted=(deleted,))
    monkeypatch.setattr(acl_admin, "apply_acls", lambda settings, wanted: changes)
    env = {"PIN_HOME": str(tmp_path), "PIN_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9"}
    shown = CliRunner().invoke(app, ["acls", "--apply"], env=env)
    assert shown.exit_code == 0, shown.output
    wanted = len(required_acls(_settings(), _table()))
    assert shown.output.splitlines() == [
        f"created ALLOW User:pin-crm READ TOPIC {topics.APPOINTMENT_CREATED}",
        f"deleted ALLOW User:pin-crm WRITE TOPIC {topics.APPOINTMENT_CANCELLED}",
        f"1 created, 1 deleted, {wanted} bindings wanted",
    ]
    as_json = CliRunner().invoke(app, ["acls", "--apply", "--json"], env=env)
    assert json.loads(as_json.output) == {"created": acls.records([created]), "deleted": acls.records([deleted])}
