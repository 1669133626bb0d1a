"""The :class:`~pin.messaging.acls.AclAdmin` port on confluent-kafka's AdminClient, and `pin acls --apply`.

A broker that does not implement the ACL APIs may answer them in a way the Kafka client cannot survive: the embedded
broker (Tansu) answers DescribeAcls with an empty success and CreateAcls with a reply on which librdkafka fails an
assertion and aborts the whole process. So the first CreateAcls of a run is sent by a child process
(``python -m pin.messaging.acl_admin``), which also checks that the broker then returns the binding; only when it
did does this process go on. Run as ``python -m pin.messaging.acl_admin`` it is that child: one binding as JSON on
stdin, exit 0 when the broker keeps it, else one line on stderr and exit 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from pin.messaging.acls import AclChanges, AclEntry, converge, managed_principals, plan
from pin.messaging.kafka import client_config, silent_client_logger
from pin.observability.logging import error_text
from pin.settings import ConfigurationError, Settings, load_settings

# librdkafka names Kafka's CLUSTER resource BROKER
_RESOURCE_TYPES = {"CLUSTER": ResourceType.BROKER}
_RESOURCE_NAMES = {value: key for key, value in _RESOURCE_TYPES.items()}
# How long the probe child may take: two requests, each bounded by the timeout, plus an interpreter start
_PROBE_MARGIN_SECONDS = 30.0


class AclError(RuntimeError):
    """The cluster's ACLs could not be read or changed."""


class KafkaAclAdmin:
    """The broker's ACL APIs through confluent-kafka's AdminClient; a failure is a one-line :class:`AclError`."""

    def __init__(self, settings: Settings, timeout: float = 15.0) -> None:
        # librdkafka's own lines are dropped: the command reports a failure itself, in one line
        self._admin = AdminClient(client_config(settings, logger=silent_client_logger("pin.acls.kafka")))
        self._timeout = timeout

    def describe(self) -> list[AclEntry]:
        """Every binding the cluster holds (DescribeAcls with a filter that matches all)."""
        # None matches any name, principal and host (the library's type hints say str)
        anything: Any = None
        everything = AclBindingFilter(
            ResourceType.ANY,
            anything,
            ResourcePatternType.ANY,
            anything,
            anything,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        try:
            bindings = self._admin.describe_acls(everything, request_timeout=self._timeout).result(self._timeout)
        except (KafkaException, TimeoutError) as exc:
            raise AclError(f"DescribeAcls failed: {error_text(exc) or 'no answer'}") from exc
        return [_entry_of(binding) for binding in bindings]

    def create(self, entries: Sequence[AclEntry]) -> None:
        """CreateAcls of ``entries``."""
        futures = self._admin.create_acls([_binding_of(e) for e in entries], request_timeout=self._timeout)
        self._wait("CreateAcls", futures)

    def delete(self, entries: Sequence[AclEntry]) -> None:
        """DeleteAcls with one exact filter per entry, so that nothing else matches."""
        futures = self._admin.delete_acls([_filter_of(e) for e in entries], request_timeout=self._timeout)
        self._wait("DeleteAcls", futures)

    def _wait(self, request: str, futures: dict[Any, Any]) -> None:
        for binding, future in futures.items():
            try:
                future.result(self._timeout)
            except (KafkaException, TimeoutError) as exc:
                raise AclError(f"{request} of {_entry_of(binding).line()} failed: {error_text(exc)}") from exc


def _binding_args(entry: AclEntry) -> tuple[Any, ...]:
    return (
        _RESOURCE_TYPES.get(entry.resource_type) or ResourceType[entry.resource_type],
        entry.resource_name,
        ResourcePatternType[entry.pattern_type],
        entry.principal,
        entry.host,
        AclOperation[entry.operation],
        AclPermissionType[entry.permission],
    )


def _binding_of(entry: AclEntry) -> AclBinding:
    return AclBinding(*_binding_args(entry))


def _filter_of(entry: AclEntry) -> AclBindingFilter:
    return AclBindingFilter(*_binding_args(entry))


def _entry_of(binding: Any) -> AclEntry:
    """An AclBinding (or the filter a result is keyed by) as an entry."""
    return AclEntry(
        principal=binding.principal,
        resource_type=_RESOURCE_NAMES.get(binding.restype, binding.restype.name),
        resource_name=binding.name,
        pattern_type=binding.resource_pattern_type.name,
        operation=binding.operation.name,
        host=binding.host,
        permission=binding.permission_type.name,
    )


def apply_acls(settings: Settings, wanted: Sequence[AclEntry], *, timeout: float = 15.0) -> AclChanges:
    """`pin acls --apply`: converge the managed principals' bindings to ``wanted`` (probing the broker first)."""
    admin = KafkaAclAdmin(settings, timeout)
    managed = managed_principals(settings)
    first = plan(admin.describe(), wanted, managed)
    if not first.created:
        return converge(admin, wanted, managed)
    probed = first.created[0]
    _probe_create(settings, probed, timeout)
    changes = converge(admin, wanted, managed)
    return replace(changes, created=tuple(sorted({probed, *changes.created})))


def _probe_create(settings: Settings, entry: AclEntry, timeout: float) -> None:
    """CreateAcls of ``entry`` in a child process (see the module's docstring); AclError when it did not stick."""
    try:
        child = subprocess.run(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", __name__],
            input=json.dumps(asdict(entry)),
            env={
                **os.environ,
                "PIN_KAFKA_BOOTSTRAP_SERVERS": settings.kafka.require_bootstrap_servers(),
            },  # even `pin up`'s
            capture_output=True,
            text=True,
            timeout=2 * timeout + _PROBE_MARGIN_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AclError(f"CreateAcls did not finish within {2 * timeout + _PROBE_MARGIN_SECONDS:g} s") from None
    last = ([line for line in child.stderr.splitlines() if line.strip()] or [""])[-1][:300]
    if child.returncode < 0:  # killed by a signal: SIGABRT from librdkafka's failed assertion
        raise AclError(
            "the broker does not implement the ACL APIs: its answer to CreateAcls made the Kafka client abort"
            f" ({last or f'signal {-child.returncode}'}); nothing was changed"
        )
    if child.returncode != 0:
        raise AclError(last or f"CreateAcls failed (exit {child.returncode})")


def _probe_main() -> int:
    """The probe child: create the binding read from stdin, then check that the broker returns it."""
    try:
        entry = AclEntry(**json.loads(sys.stdin.read()))
        admin = KafkaAclAdmin(load_settings())
        admin.create([entry])
        if entry not in set(admin.describe()):
            raise AclError(
                "the broker does not implement the ACL APIs: it accepted CreateAcls but DescribeAcls does not"
                " return the binding"
            )
    except (AclError, ConfigurationError):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_probe_main())
