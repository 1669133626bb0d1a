"""The API measured like every other role: requests by route template, method and status class, and a latency
histogram, on its own /metrics; a path no route matches is counted as ``unmatched``, never by its text."""

from __future__ import annotations

import uuid
import warnings

import pytest
from prometheus_client import REGISTRY

from tests.support.api import bearer

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = [pytest.mark.integration]


def _count(route: str, method: str, status_class: str) -> float:
    labels = {"route": route, "method": method, "status_class": status_class}
    return REGISTRY.get_sample_value("pin_http_requests_total", labels) or 0.0


def _observed(route: str, method: str) -> float:
    return REGISTRY.get_sample_value("pin_http_request_duration_seconds_count", {"route": route, "method": method}) or 0


def test_requests_are_counted_by_route_template_method_and_status_class(client: TestClient) -> None:
    agent = bearer(uuid.uuid4(), uuid.uuid4(), "agent")
    slot = "/calendar/slots/{slot_id}"
    before = {
        "ok": _count("/notifications", "GET", "2xx"),
        "unauthorized": _count("/notifications", "GET", "4xx"),
        "missing slot": _count(slot, "GET", "4xx"),
        "unmatched": _count("unmatched", "GET", "4xx"),
        "timed": _observed("/notifications", "GET"),
    }
    assert client.get("/notifications", headers=agent).status_code == 200
    assert client.get("/notifications").status_code == 401
    assert client.get(f"/calendar/slots/{uuid.uuid4()}", headers=agent).status_code == 404
    hostile = "/no/such/" + "x" * 50
    assert client.get(hostile).status_code == 404
    assert _count("/notifications", "GET", "2xx") == before["ok"] + 1
    assert _count("/notifications", "GET", "4xx") == before["unauthorized"] + 1
    assert _count(slot, "GET", "4xx") == before["missing slot"] + 1  # the template, not the id
    assert _count("unmatched", "GET", "4xx") == before["unmatched"] + 1
    assert _observed("/notifications", "GET") == before["timed"] + 2

    exposition = client.get("/metrics").text
    assert 'pin_http_requests_total{method="GET",route="/notifications",status_class="2xx"}' in exposition
    assert 'pin_http_request_duration_seconds_bucket{le="0.005",method="GET",route="/notifications"}' in exposition
    assert hostile not in exposition
