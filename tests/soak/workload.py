"""The soak's workload: users of two tenants driving the HTTP API (slots, bookings, confirms, declines, cancels,
reschedules, promotions with a short EndsAt and their cancels, catalog cards and news posts).

Every acknowledged answer (2xx) is written down: the checker proves no acknowledged write was lost or undone.
Failures while faults are injected (connection errors, 5xx) are counted, never retried blindly: an unanswered
request may or may not have committed, and the checker judges the final state from the database and topics.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.soak.harness import token

TOP_1D = "6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0004"  # the seeded one-day package: EndsAt can be seconds away


@dataclass
class Tenant:
    """One tenant's users and what the workload knows of its records."""

    id: uuid.UUID
    agents: list[uuid.UUID]
    investors: list[uuid.UUID]
    manager: uuid.UUID
    admin: uuid.UUID
    slots: dict[uuid.UUID, uuid.UUID] = field(default_factory=dict)  # available slot -> its agent
    appointments: dict[uuid.UUID, tuple[uuid.UUID, uuid.UUID, int]] = field(default_factory=dict)  # -> agent, inv, ver
    purchases: dict[uuid.UUID, int] = field(default_factory=dict)  # active purchase -> version
    targets: list[tuple[str, uuid.UUID]] = field(default_factory=list)  # (TargetKind, id) of cards and posts

    @classmethod
    def new(cls) -> Tenant:
        """A tenant with 3 agents, 4 investors, a manager and an admin."""
        return cls(
            uuid.uuid4(), [uuid.uuid4() for _ in range(3)], [uuid.uuid4() for _ in range(4)], uuid.uuid4(), uuid.uuid4()
        )


@dataclass
class History:
    """What the API acknowledged: the checker's input from the workload's side."""

    # appointment id -> statuses the API answered for it, in order (Pending, Confirmed, Declined, ...)
    appointment_acks: dict[str, list[str]] = field(default_factory=dict)
    # purchase id -> statuses the API answered for it
    purchase_acks: dict[str, list[str]] = field(default_factory=dict)
    # (kind, id) -> tenant of the cards and posts the API acknowledged
    target_acks: dict[str, str] = field(default_factory=dict)
    ops: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack_appointment(self, body: dict[str, Any]) -> None:
        """Note an appointment as the API returned it."""
        with self.lock:
            self.appointment_acks.setdefault(body["id"], []).append(body["status"])

    def ack_purchase(self, body: dict[str, Any]) -> None:
        """Note a purchase as the API returned it."""
        with self.lock:
            self.purchase_acks.setdefault(body["id"], []).append(body["status"])

    def count(self, op: str, outcome: str) -> None:
        """Count one request outcome."""
        with self.lock:
            self.ops[f"{op}:{outcome}"] += 1


class Workload:
    """``threads`` users hammering the API until stopped."""

    def __init__(self, base_url: str, history: History, *, seed: int, threads: int = 3) -> None:
        self.base_url = base_url
        self.history = history
        self.tenants = [Tenant.new(), Tenant.new()]
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(random.Random(seed + i),), name=f"soak-user-{i}", daemon=True)
            for i in range(threads)
        ]
        self._lock = threading.Lock()
        self._slot_clock = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(hours=3)

    def start(self) -> None:
        """Start the users."""
        for thread in self._threads:
            thread.start()

    def wait_warm(self, timeout: float) -> None:
        """Until cards, posts, slots, appointments and a promotion were acknowledged (polling, with a deadline)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ops = self.history.ops
            if all(ops[f"{op}:{code}"] > 0 for op, code in
                   (("put-card", "201"), ("put-post", "201"), ("book", "201"), ("activate", "201"))):  # fmt: skip
                return
            time.sleep(0.5)
        raise AssertionError(f"the workload did not warm up in {timeout} s: {dict(self.history.ops)}")

    def stop(self) -> None:
        """Stop the users and wait for their last requests."""
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    # ---------------------------------------------------------------------------------------------- plumbing

    def _call(  # noqa: PLR0917 - one request's parts
        self,
        client: httpx.Client,
        op: str,
        method: str,
        path: str,
        bearer: str,
        body: object | None = None,
    ) -> dict[str, Any] | None:
        """One request; the body of a 2xx answer, else None (the outcome is counted)."""
        try:
            response = client.request(method, path, json=body, headers={"Authorization": f"Bearer {bearer}"})
        except httpx.HTTPError as exc:
            self.history.count(op, type(exc).__name__)
            time.sleep(0.2)  # the API is restarting: do not spin
            return None
        self.history.count(op, str(response.status_code))
        if response.is_success:
            result: dict[str, Any] = response.json()
            return result
        return None

    def _next_slot_start(self) -> datetime:
        with self._lock:
            self._slot_clock += timedelta(minutes=30)
            return self._slot_clock

    # ---------------------------------------------------------------------------------------------- operations

    def _run(self, rng: random.Random) -> None:
        operations = [
            (self._create_slot, 24),
            (self._book, 24),
            (self._confirm, 7),
            (self._decline, 5),
            (self._agent_cancel, 4),
            (self._investor_cancel, 4),
            (self._reschedule, 6),
            (self._activate_promotion, 8),
            (self._cancel_promotion, 3),
            (self._put_card, 3),
            (self._put_post, 3),
        ]
        functions = [op for op, _ in operations]
        weights = [w for _, w in operations]
        with httpx.Client(base_url=self.base_url, timeout=10) as client:
            while not self._stop.is_set():
                tenant = rng.choice(self.tenants)
                rng.choices(functions, weights)[0](client, rng, tenant)
                time.sleep(rng.uniform(0.0, 0.05))

    def _create_slot(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        agent = rng.choice(tenant.agents)
        start = self._next_slot_start()
        body = {
            "startAt": start.isoformat(),
            "endAt": (start + timedelta(minutes=30)).isoformat(),
            "timeZone": "Europe/Moscow",
            "kind": rng.choice(["Showing", "Consultation"]),
            "minLeadTimeMinutes": 0,
            "autoConfirm": rng.random() < 0.15,
        }
        slot = self._call(client, "create-slot", "POST", "/calendar/slots", token(agent, tenant.id, "agent"), body)
        if slot is not None:
            with self._lock:
                tenant.slots[uuid.UUID(slot["id"])] = agent

    def _take_slot(self, rng: random.Random, tenant: Tenant, agent: uuid.UUID | None = None) -> uuid.UUID | None:
        with self._lock:
            choices = [s for s, a in tenant.slots.items() if agent is None or a == agent]
            if not choices:
                return None
            slot = rng.choice(choices)
            del tenant.slots[slot]
            return slot

    def _book(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        slot = self._take_slot(rng, tenant)
        if slot is None:
            return
        investor = rng.choice(tenant.investors)
        bearer = token(investor, tenant.id, "investor")
        appointment = self._call(client, "book", "POST", f"/calendar/slots/{slot}/book", bearer)
        if appointment is not None:
            self.history.ack_appointment(appointment)
            with self._lock:
                tenant.appointments[uuid.UUID(appointment["id"])] = (
                    uuid.UUID(appointment["agentUserId"]),
                    investor,
                    appointment["version"],
                )

    def _take_appointment(self, rng: random.Random, tenant: Tenant) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID] | None:
        with self._lock:
            if not tenant.appointments:
                return None
            appointment = rng.choice(list(tenant.appointments))
            agent, investor, _ = tenant.appointments.pop(appointment)
            return appointment, agent, investor

    def _keep(self, tenant: Tenant, body: dict[str, Any], agent: uuid.UUID, investor: uuid.UUID) -> None:
        if body["status"] in ("Pending", "Confirmed"):
            with self._lock:
                tenant.appointments[uuid.UUID(body["id"])] = (agent, investor, body["version"])

    def _agent_action(self, client: httpx.Client, rng: random.Random, tenant: Tenant, action: str) -> None:
        taken = self._take_appointment(rng, tenant)
        if taken is None:
            return
        appointment, agent, investor = taken
        body = None if action == "confirm" else {"reason": rng.choice(["busy", "object sold", "ill"])}
        path = f"/calendar/appointments/{appointment}/{action}"
        result = self._call(client, action, "POST", path, token(agent, tenant.id, "agent"), body)
        if result is not None:
            self.history.ack_appointment(result)
            self._keep(tenant, result, agent, investor)
        elif action == "confirm":
            # a 409 (already expired) leaves nothing to act on; anything else may still be Pending
            with self._lock:
                tenant.appointments.setdefault(appointment, (agent, investor, 0))

    def _confirm(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        self._agent_action(client, rng, tenant, "confirm")

    def _decline(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        self._agent_action(client, rng, tenant, "decline")

    def _agent_cancel(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        self._agent_action(client, rng, tenant, "cancel")

    def _investor_cancel(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        taken = self._take_appointment(rng, tenant)
        if taken is None:
            return
        appointment, _, investor = taken
        body = {"reason": "plans changed"} if rng.random() < 0.5 else None
        path = f"/calendar/my/appointments/{appointment}/cancel"
        result = self._call(client, "investor-cancel", "POST", path, token(investor, tenant.id, "investor"), body)
        if result is not None:
            self.history.ack_appointment(result)

    def _reschedule(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        taken = self._take_appointment(rng, tenant)
        if taken is None:
            return
        appointment, agent, investor = taken
        new_slot = self._take_slot(rng, tenant, agent)
        if new_slot is None:
            with self._lock:
                tenant.appointments[appointment] = (agent, investor, 0)
            return
        path = f"/calendar/my/appointments/{appointment}/reschedule"
        bearer = token(investor, tenant.id, "investor")
        result = self._call(client, "reschedule", "POST", path, bearer, {"newSlotId": str(new_slot)})
        if result is not None:
            self.history.ack_appointment(result)
            with self.history.lock:
                self.history.appointment_acks.setdefault(str(appointment), []).append("Cancelled")
            self._keep(tenant, result, agent, investor)

    def _activate_promotion(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        with self._lock:
            if not tenant.targets:
                return
            targets = rng.sample(tenant.targets, min(len(tenant.targets), rng.randint(1, 3)))
        ends_at = datetime.now(UTC) + timedelta(seconds=rng.uniform(3, 15))
        body = {
            "packageId": TOP_1D,
            "targets": [{"targetKind": kind, "targetId": str(target)} for kind, target in targets],
            "endsAt": ends_at.isoformat(),
        }
        result = self._call(
            client, "activate", "POST", "/promotions", token(tenant.manager, tenant.id, "manager"), body
        )
        if result is not None:
            self.history.ack_purchase(result)
            with self._lock:
                tenant.purchases[uuid.UUID(result["id"])] = result["version"]

    def _cancel_promotion(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        with self._lock:
            if not tenant.purchases:
                return
            purchase = rng.choice(list(tenant.purchases))
            del tenant.purchases[purchase]
        bearer = token(tenant.manager, tenant.id, "manager")
        result = self._call(client, "cancel-promotion", "POST", f"/promotions/{purchase}/cancel", bearer)
        if result is not None:
            self.history.ack_purchase(result)

    def _put_card(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        kind = rng.choice(["Project", "PropertyObject"])
        card = uuid.uuid4()
        body: dict[str, Any] = {"published": rng.random() < 0.8}
        if kind == "PropertyObject":  # an object belongs to a project: one of the tenant's, or one not here yet
            with self._lock:
                projects = [target for target_kind, target in tenant.targets if target_kind == "Project"]
            body["projectId"] = str(rng.choice(projects) if projects else uuid.uuid4())
        path = f"/catalog/cards/{kind}/{card}"
        if self._call(client, "put-card", "PUT", path, token(tenant.admin, tenant.id, "admin"), body) is not None:
            with self._lock:
                tenant.targets.append((kind, card))
            with self.history.lock:
                self.history.target_acks[f"{kind}:{card}"] = str(tenant.id)

    def _put_post(self, client: httpx.Client, rng: random.Random, tenant: Tenant) -> None:
        post = uuid.uuid4()
        path = f"/news/posts/{post}"
        bearer = token(tenant.admin, tenant.id, "admin")
        if self._call(client, "put-post", "PUT", path, bearer, {"published": rng.random() < 0.8}) is not None:
            with self._lock:
                tenant.targets.append(("Post", post))
            with self.history.lock:
                self.history.target_acks[f"Post:{post}"] = str(tenant.id)
