"""`pin up --demo`: sample data, made through the public HTTP API, that expires within minutes.

One tenant with an agent, two investors, a company manager and an admin. The demo books appointments the
agent never answers (the appointment-timeout worker expires them: one slot goes back on sale, one is past
its lead time and expires), one auto-confirmed appointment, one declined at once, and two promotion
purchases that end within minutes (the expire-promotions worker ends them and the boosts disappear).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pin.api.auth import mint_token

# How long a demo appointment stays Pending: `pin up --demo` runs the API with this PendingTtl.
DEMO_PENDING_TTL_SECONDS = 120


class DemoError(Exception):
    """The demo data could not be created through the API."""


@dataclass(frozen=True)
class _Caller:
    name: str
    user_id: uuid.UUID
    token: str


def wait_until_ready(base_url: str, timeout: float = 300.0, stopping: Callable[[], bool] = lambda: False) -> None:
    """Block until the API answers /readyz (or ``stopping`` says to give up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stopping():
        try:
            with urllib.request.urlopen(f"{base_url}/readyz", timeout=2) as response:  # noqa: S310 - loopback
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    if stopping():
        return
    raise DemoError(f"the API at {base_url} did not become ready in {timeout:.0f} s")


def _call(base_url: str, caller: _Caller, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 - loopback URL we built
        f"{base_url}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {caller.token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise DemoError(f"{method} {path} answered {exc.code}: {exc.read()[:300]!r}") from None


def load_demo_data(base_url: str, jwt_secret: str) -> list[str]:
    """Create the demo through the API; returns the banner lines (who is who, tokens, what to watch)."""
    tenant = uuid.uuid4()

    def caller(name: str, *roles: str) -> _Caller:
        user = uuid.uuid4()
        token = mint_token(jwt_secret, user_id=user, tenant_id=tenant, roles=list(roles), ttl_seconds=8 * 3600)
        return _Caller(name, user, token)

    agent, investor, investor2 = (
        caller("agent", "agent"),
        caller("investor", "investor"),
        caller("investor2", "investor"),
    )
    manager, admin = caller("manager", "manager"), caller("admin", "admin")
    now = datetime.now(UTC)

    def slot(start_in: timedelta, lead_minutes: int, *, auto_confirm: bool = False) -> str:
        start = now + start_in
        body = {
            "startAt": start.isoformat(),
            "endAt": (start + timedelta(hours=1)).isoformat(),
            "timeZone": "Europe/Moscow",
            "kind": "Showing",
            "minLeadTimeMinutes": lead_minutes,
            "autoConfirm": auto_confirm,
        }
        return str(_call(base_url, agent, "POST", "/calendar/slots", body)["id"])

    def book(who: _Caller, slot_id: str) -> dict[str, Any]:
        booked: dict[str, Any] = _call(base_url, who, "POST", f"/calendar/slots/{slot_id}/book")
        return booked

    # PendingExpiresAt = min(now + 2 min, StartAt - lead): released back on sale after expiry
    released = book(investor, slot(timedelta(hours=3), 60))
    # StartAt - lead is 90 s away, before the 2 min PendingTtl: it expires then, and so does its slot
    lead_passed = book(investor2, slot(timedelta(minutes=61, seconds=30), 60))
    confirmed = book(investor, slot(timedelta(hours=5), 60, auto_confirm=True))
    declined = book(investor2, slot(timedelta(hours=6), 60))
    _call(
        base_url,
        agent,
        "POST",
        f"/calendar/appointments/{declined['id']}/decline",
        {"reason": "demo: the agent is away"},
    )

    project, flat, post = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    _call(base_url, admin, "PUT", f"/catalog/cards/Project/{project}", {"published": True})
    _call(
        base_url, admin, "PUT", f"/catalog/cards/PropertyObject/{flat}", {"projectId": str(project), "published": True}
    )
    _call(base_url, admin, "PUT", f"/news/posts/{post}", {"published": True})
    package = _call(base_url, manager, "GET", "/promotions/packages")[0]
    promo1 = _call(
        base_url,
        manager,
        "POST",
        "/promotions",
        {
            "packageId": package["id"],
            "endsAt": (now + timedelta(minutes=2)).isoformat(),
            "targets": [
                {"targetKind": "Project", "targetId": str(project)},
                {"targetKind": "Post", "targetId": str(post)},
            ],
        },
    )
    promo2 = _call(
        base_url,
        manager,
        "POST",
        "/promotions",
        {
            "packageId": package["id"],
            "endsAt": (now + timedelta(minutes=4)).isoformat(),
            "targets": [{"targetKind": "PropertyObject", "targetId": str(flat)}],
        },
    )

    return [
        "pin up --demo: sample data created (tenant " + str(tenant) + ")",
        f"  appointment {released['id']} Pending, expires at {released['pendingExpiresAt']} (slot back on sale)",
        f"  appointment {lead_passed['id']} Pending, expires at {lead_passed['pendingExpiresAt']} (slot expires)",
        f"  appointment {confirmed['id']} Confirmed (auto-confirm: never expires)",
        f"  appointment {declined['id']} Declined (the investor is notified)",
        f"  promotion {promo1['id']} ends at {promo1['endsAt']}, promotion {promo2['id']} at {promo2['endsAt']}",
        f"  watch: curl -H 'Authorization: Bearer {investor.token}' {base_url}/calendar/appointments/{released['id']}",
        f"         curl -H 'Authorization: Bearer {investor.token}' {base_url}/notifications",
        f"         curl -H 'Authorization: Bearer {admin.token}' {base_url}/catalog/cards/PropertyObject/{flat}",
        "         pin status --watch   (in this folder, or with PIN_HOME: it finds this pin up)",
    ]
