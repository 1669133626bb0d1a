"""Timed HTTP requests from inside a network namespace (run as ``python -m tests.support.http_probe PLAN``).

The API of a cut-off namespace is reachable only from inside it; this process sends the requests of a plan,
each at its offset and on its own thread, and prints one JSON line per answer with the monotonic times it was
sent and answered (CLOCK_MONOTONIC is the machine's: the test compares them with its own).

PLAN is JSON: ``{"base": URL, "token": T, "timeout": S, "requests": [[offset, method, path, body|null], ...]}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import httpx

_OUTPUT = threading.Lock()  # one answer per line: the threads' prints must not interleave


def _emit(line: dict[str, Any]) -> None:
    with _OUTPUT:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def _send(client: httpx.Client, index: int, request: list[Any], start: float, token: str) -> None:
    offset, method, path, body = request
    time.sleep(max(0.0, start + offset - time.monotonic()))
    sent = time.monotonic()
    line: dict[str, Any] = {"index": index, "method": method, "path": path, "sent": sent}
    try:
        response = client.request(method, path, json=body, headers={"Authorization": f"Bearer {token}"})
        line |= {"status": response.status_code, "type": response.headers.get("content-type", "")}
    except httpx.HTTPError as exc:
        line |= {"status": None, "error": type(exc).__name__}
    line["answered"] = time.monotonic()
    _emit(line)


def main() -> None:
    """Run the plan given as the first argument."""
    plan = json.loads(sys.argv[1])
    start = time.monotonic()
    _emit({"started": start})
    with httpx.Client(base_url=plan["base"], timeout=plan["timeout"]) as client:
        threads = [
            threading.Thread(target=_send, args=(client, index, request, start, plan["token"]))
            for index, request in enumerate(plan["requests"])
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


if __name__ == "__main__":
    main()
