"""A role process in a network namespace of its own, whose link to the host can be cut silently.

A veth pair joins the namespace to the host: the role's end inside, the host's end outside, a /30 between them.
The test's PostgreSQL (and broker) listen on the host end's address, so a role in the namespace reaches them over
the pair while the test itself reaches them locally. :meth:`NetworkNamespace.cut` takes the **host** end down: the
role's packets vanish without an answer (no RST, no FIN, no "network unreachable": that is what downing the role's
own end gives), and the host's answers to the namespace meet a blackhole route of our own instead of the default
route, so that nothing leaves the machine. ``tc netem`` is not available here; this needs only ``ip`` and root.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import random
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pin.local.embedded.postgres import EmbeddedPostgres
from pin.settings import Settings
from tests.support.infra import TestDatabases

# The /30s are drawn from here (a private range other tools on this machine are unlikely to use).
# A cut-off role's dead-peer settings: the production settings (docs/operations.md, "A network that drops
# packets"), shortened so that a link-cut test takes seconds; each test adds its role's own.
DEAD_PEER_ENV = {
    "PIN_DATABASE_KEEPALIVES_IDLE_SECONDS": "1",
    "PIN_DATABASE_KEEPALIVES_INTERVAL_SECONDS": "1",
    "PIN_DATABASE_KEEPALIVES_COUNT": "2",
    "PIN_DATABASE_TCP_USER_TIMEOUT_MS": "3000",
    "PIN_DATABASE_CONNECT_TIMEOUT_SECONDS": "2",
    "PIN_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS": "3000",
}


def settings_of(env: dict[str, str]) -> Settings:
    """The settings a role started with ``env`` reads (for the bounds a test takes from pin.db)."""
    return Settings.model_validate({key.removeprefix("PIN_").lower(): value for key, value in env.items()})


POOL = ipaddress.ip_network("10.240.0.0/12")
_POOL = POOL


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (not root, no ``ip``), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs the tests as root)"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=10)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /30 of the pool that no address or route on this machine uses yet."""
    used = _ip("-o", "addr").stdout + _ip("route").stdout
    for _ in range(100):
        subnet = ipaddress.ip_network((int(_POOL.network_address) + 4 * random.randrange(_POOL.num_addresses // 4), 30))
        prefix = ".".join(str(subnet.network_address).split(".")[:3]) + "."
        if prefix not in used:
            return subnet  # type: ignore[return-value]
    raise RuntimeError("no free /30 for a test namespace")


@dataclass
class Link:
    """One veth pair between the host and a namespace, a /30 between its two ends."""

    host_link: str
    subnet: ipaddress.IPv4Network

    @property
    def host_address(self) -> str:
        """The host end's address: what a server listens on and the role connects to."""
        return str(self.subnet.network_address + 1)

    @property
    def role_address(self) -> str:
        """The namespace end's address."""
        return str(self.subnet.network_address + 2)

    def cut(self) -> None:
        """Take the host end down: from now on the role's packets over this pair vanish silently."""
        _ip("link", "set", self.host_link, "down")

    def restore(self) -> None:
        """Bring the host end up again: the connections that survived resume."""
        _ip("link", "set", self.host_link, "up")

    def create(self, namespace: str) -> None:
        """Make the pair, move its inner end into ``namespace``, address and raise both ends."""
        inner = f"{self.host_link[:-1]}n"
        _ip("link", "add", self.host_link, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", namespace)
        _ip("addr", "add", f"{self.host_address}/30", "dev", self.host_link)
        _ip("link", "set", self.host_link, "up")
        inside = ("netns", "exec", namespace, "ip")
        _ip(*inside, "addr", "add", f"{self.role_address}/30", "dev", inner)
        _ip(*inside, "link", "set", inner, "up")
        # while the host end is down its subnet route is gone: without this the host's answers (TCP
        # retransmissions of the servers) would take the default route off the machine
        _ip("route", "add", "blackhole", str(self.subnet), "metric", "1000")

    def remove(self) -> None:
        """Delete the pair and its blackhole route (the namespace's removal takes the inner end too)."""
        _ip("route", "del", "blackhole", str(self.subnet), "metric", "1000", check=False)
        _ip("link", "del", self.host_link, check=False)


@dataclass
class NetworkNamespace:
    """One namespace joined to the host by veth pairs (see the module's docstring); the first is the default."""

    name: str
    tag: str
    links: list[Link]

    @property
    def host_address(self) -> str:
        """The first pair's host end: what the test's PostgreSQL listens on."""
        return self.links[0].host_address

    @property
    def role_address(self) -> str:
        """The first pair's namespace end: the client address of the role's database sessions."""
        return self.links[0].role_address

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def cut(self) -> None:
        """Cut the first pair (the database's)."""
        self.links[0].cut()

    def restore(self) -> None:
        """Restore every pair."""
        for link in self.links:
            link.restore()

    def route_everything_via_host(self) -> None:
        """A default route over the first pair: the namespace reaches every address of the host, not only its /30
        (the soak's servers listen on the host end of a hub pair that is never cut)."""
        _ip("netns", "exec", self.name, "ip", "route", "add", "default", "via", self.host_address)

    def add_link(self) -> Link:
        """Another pair into the namespace (a broker on its own path, cut on its own)."""
        link = Link(host_link=f"pn{self.tag}{len(self.links)}h", subnet=_free_subnet())
        self.links.append(link)
        link.create(self.name)
        return link

    def _create(self) -> None:
        _ip("netns", "add", self.name)
        _ip("netns", "exec", self.name, "ip", "link", "set", "lo", "up")
        self.links[0].create(self.name)

    def _remove(self) -> None:
        for link in self.links:
            link.remove()
        _ip("netns", "del", self.name, check=False)


_NAMESPACES = itertools.count()


@contextmanager
def network_namespace() -> Iterator[NetworkNamespace]:
    """A namespace for this test only (its name carries our pid), removed afterwards."""
    # unique within this process by the counter (two random suffixes met among the soak's seven namespaces),
    # across processes by the pid; short enough for a 15-character interface name ("pn" + tag + "0h")
    tag = f"{os.getpid()}{next(_NAMESPACES) % 100:02d}"
    first = Link(host_link=f"pn{tag}0h", subnet=_free_subnet())
    namespace = NetworkNamespace(name=f"pin-test-{tag}", tag=tag, links=[first])
    try:
        namespace._create()
    except subprocess.CalledProcessError as exc:
        namespace._remove()
        raise RuntimeError(f"cannot create a network namespace: {exc.stderr.strip()}") from exc
    try:
        yield namespace
    finally:
        namespace._remove()


@dataclass
class CutOffLab:
    """A namespace and a PostgreSQL of the test's own listening on the host end's address (and its template)."""

    namespace: NetworkNamespace
    databases: TestDatabases


@contextmanager
def cut_off_lab(root: Path) -> Iterator[CutOffLab]:
    """A namespace and a server on its host end (the session's embedded server listens on 127.0.0.1 only)."""
    with network_namespace() as namespace:
        server = EmbeddedPostgres(
            root / "postgres", host=namespace.host_address, trusted_network=str(namespace.links[0].subnet)
        )
        server.start()
        try:
            databases = TestDatabases(server.url)
            try:
                yield CutOffLab(namespace, databases)
            finally:
                databases.close()
        finally:
            server.destroy()
