"""The console's routes under ``/console``: pages (any platform role) and actions (operator; a POST with a reason
and, from a session, its CSRF token). :func:`install` adds them to the API; the composition root calls it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool

from pin.api.deps import Pool
from pin.console import access, actions, pages
from pin.console.access import ConsoleRefusal, Viewer
from pin.messaging.consumer.dead_letters import index
from pin.messaging.consumer.dead_letters.index import LetterFilter
from pin.messaging.topics import CONSUMER_GROUPS
from pin.observability.thresholds import crossed
from pin.rfc3339 import is_rfc3339
from pin.settings import Settings
from pin.status.snapshot import Unavailable

router = APIRouter(prefix=access.PREFIX, include_in_schema=False)
Who = Annotated[Viewer, Depends(access.viewer)]

# Seconds between a page's refreshes where JavaScript runs (static/console.js reads it from the body).
REFRESH_SECONDS = 10

_TEMPLATES = Environment(
    loader=PackageLoader("pin.console", "templates"), autoescape=True, undefined=StrictUndefined, trim_blocks=True
)
_TEMPLATES.tests["crossed"] = lambda value, name: crossed(name, value)
_TEMPLATES.tests["unavailable"] = lambda value: isinstance(value, Unavailable)
# a value in a path segment: every character but the unreserved ones escaped ("/" too)
_TEMPLATES.filters["pathpart"] = lambda value: quote(str(value), safe="")


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def render(request: Request, template: str, who: Viewer | None, status: int = 200, **context: Any) -> HTMLResponse:
    """A page of the console: ``template`` with the viewer, what is paused, and the page's ``context``."""
    paused: list[Any] = context.pop("paused", None) or []
    if who is not None and not paused:
        with request.app.state.pool.connection() as conn:
            paused = pages.paused(conn)
    html = page_html(
        template, who=who, paused=paused, path=request.url.path, prometheus=_settings(request).console_prometheus_url,
        **context,
    )  # fmt: skip
    return HTMLResponse(html, status_code=status)


def page_html(template: str, *, who: Viewer | None, paused: list[Any], path: str, prometheus: str | None,
              **context: Any) -> str:  # fmt: skip
    """``template`` rendered with what every page shows (the viewer, what is paused) and the page's ``context``."""
    return _TEMPLATES.get_template(template).render(
        who=who, paused=paused, path=path, refresh=REFRESH_SECONDS, prometheus=prometheus, query=_query_link,
        quote=quote, **context,
    )  # fmt: skip


def _query_link(path: str, params: Mapping[str, object]) -> str:
    """``path`` with the non-empty ``params`` as its query string."""
    kept = {name: str(value) for name, value in params.items() if value not in (None, "", False)}
    return f"{path}?{urlencode(kept)}" if kept else path


def _text(value: str | None) -> str | None:
    """A form or query field: stripped, None when empty."""
    return value.strip() or None if value is not None else None


def _int(value: str | None, name: str) -> int | None:
    text = _text(value)
    if text is None:
        return None
    if not text.isdecimal() or len(text) > 18:
        raise ConsoleRefusal(400, f"{name} must be a whole number")
    return int(text)


def _time(value: str | None, name: str) -> datetime | None:
    """An RFC 3339 time, or a form's datetime-local (``2026-12-01T21:40``, read as UTC)."""
    text = _text(value)
    if text is None:
        return None
    try:
        if is_rfc3339(text):
            return datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
        if _LOCAL.fullmatch(text):
            return datetime.fromisoformat(text).replace(tzinfo=UTC)
    except ValueError:
        pass
    raise ConsoleRefusal(400, f"{name} must be an RFC 3339 time (or YYYY-MM-DDTHH:MM, UTC)")


_LOCAL = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?", re.ASCII)


# --- who -----------------------------------------------------------------------------------------------------


@router.get("/login")
def login_page(request: Request) -> HTMLResponse:
    """The login form."""
    return render(request, "login.html", None, message=None, next=access.PREFIX)


@router.post("/login")
def login(
    request: Request,
    token: Annotated[str, Form(max_length=access.MAX_TOKEN_BYTES)] = "",
    next: Annotated[str, Form()] = "",
) -> Response:
    """Check the token and set the session cookie (HttpOnly, SameSite=Strict, Secure behind TLS, expiring with it)."""
    try:
        access.login_principal(request, token)
    except ConsoleRefusal as refusal:
        return render(request, "login.html", None, status=refusal.status, message=refusal.message, next=next)
    # only a page of the console: never an address another site chose
    target = next if next.startswith(access.PREFIX) and not next.startswith("//") else access.PREFIX
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        access.COOKIE, token.strip(), max_age=access.cookie_seconds(token.strip()), path=access.PREFIX,
        httponly=True, samesite="strict", secure=access.behind_tls(request),
    )  # fmt: skip
    return response


@router.post("/logout")
def logout(request: Request, who: Who, csrf: Annotated[str, Form()] = "") -> Response:
    """End the session (the form carries the session's CSRF token)."""
    if who.csrf is not None and csrf != who.csrf:
        raise ConsoleRefusal(403, "the form's CSRF token is missing or wrong")
    del request
    response = RedirectResponse(f"{access.PREFIX}/login", status_code=303)
    response.delete_cookie(access.COOKIE, path=access.PREFIX)
    return response


# --- pages ---------------------------------------------------------------------------------------------------


@router.get("")
def overview(request: Request, who: Who) -> HTMLResponse:
    """The system at a glance."""
    from pin.status.collect import collect_status

    settings = _settings(request)
    kafka = bool(settings.kafka_bootstrap_servers)
    snapshot = collect_status(settings, kafka=kafka, kafka_timeout=2.0, outbox=False)  # the outbox: below, bounded
    with request.app.state.pool.connection() as conn:
        outbox = pages.outbox_view(conn)
        letters = pages.open_group_letters(conn)
        cycles = pages.cycles(conn, limit=20)
        members = pages.members(conn)
    return render(
        request, "overview.html", who, s=snapshot, outbox=outbox, letters=letters, cycles=cycles, members=members
    )


@router.get("/jobs")
def jobs(request: Request, who: Who, pool: Pool) -> HTMLResponse:
    """Both workers: due backlog, poison items, recent cycles (the backlog as `pin status` counts it, and nothing
    else of its snapshot: this page does not pay for the outbox's count)."""
    from pin.status import database

    with pool.connection() as conn:
        jobs = [
            {"job": items.job, "due": items.description, "backlog": database.read(conn, database.backlog(items))}
            for items in database.JOBS
        ]
        poison = pages.poison(conn)
        cycles = pages.cycles(conn)
    return render(request, "jobs.html", who, jobs=jobs, poison=poison, cycles=cycles)


@router.get("/outbox")
def outbox(request: Request, who: Who, pool: Pool, topic: str | None = None, after: str | None = None) -> HTMLResponse:
    """Per topic backlog and age, the rows waiting, the vpart → lease map with each floor, the relay's dead letters:
    each read past the floors (docs/design/outbox-storage.md), on this page's one connection."""
    with pool.connection() as conn:
        outbox = pages.outbox_view(conn)
        waiting = pages.outbox_waiting(conn, topic=_text(topic), after=_int(after, "after"))
        leases = pages.lease_map(conn, heartbeat_seconds=_settings(request).relay_heartbeat_seconds)
        letters = pages.relay_dead_letters(conn, pages.RelayFilter(), before=None, limit=10)
    return render(
        request, "outbox.html", who, outbox=outbox, waiting=waiting, leases=leases, letters=letters, topic=_text(topic)
    )


@router.get("/groups")
def groups(request: Request, who: Who, pool: Pool) -> HTMLResponse:
    """Every consumer group: members, what waits against the SLA, held messages, open dead letters."""
    from pin.status.collect import collect_status

    settings = _settings(request)
    snapshot = collect_status(settings, kafka=bool(settings.kafka_bootstrap_servers), kafka_timeout=2.0, outbox=False)
    with pool.connection() as conn:
        letters = pages.open_group_letters(conn)
        held = pages.held(conn)
    return render(request, "groups.html", who, s=snapshot, letters=letters, held=held)


@router.get("/groups/{group}")
def group(request: Request, who: Who, pool: Pool, group: str) -> HTMLResponse:
    """One consumer group: members, partitions, offsets and lag, what waits, held messages, dead letters."""
    from pin.status.collect import collect_status

    if group not in CONSUMER_GROUPS:
        raise ConsoleRefusal(404, f"no consumer group {group!r}")
    settings = _settings(request)
    snapshot = collect_status(settings, kafka=bool(settings.kafka_bootstrap_servers), kafka_timeout=2.0, outbox=False)
    view = next(c for c in snapshot.consumers if c.group == group)
    with pool.connection() as conn:
        members = pages.members(conn, group)
        held = pages.held(conn, group=group)
        letters = pages.group_dead_letters(conn, LetterFilter(group=group), before=None)
    return render(request, "group.html", who, group=group, view=view, members=members, held=held, letters=letters)


def _letter_filter(params: Mapping[str, str | None]) -> LetterFilter:
    group = _text(params.get("group"))
    if group is not None and group not in CONSUMER_GROUPS:
        raise ConsoleRefusal(400, f"no consumer group {group!r}")
    return LetterFilter(
        group=group, topic=_text(params.get("topic")), key=_text(params.get("key")),
        error=_text(params.get("error")), since=_time(params.get("since"), "since"),
        until=_time(params.get("until"), "until"), resolved=params.get("resolved") in ("1", "on", "true"),
    )  # fmt: skip


@router.get("/dead-letters")
def dead_letters(request: Request, who: Who, pool: Pool) -> HTMLResponse:
    """Both kinds of dead letters, filtered and keyset-paginated (``kind``: group, the default, or relay)."""
    from pin.console import replay_jobs

    params = dict(request.query_params)
    kind = params.get("kind") or "group"
    if kind not in ("group", "relay"):
        raise ConsoleRefusal(400, "kind is group or relay")
    where = _letter_filter(params)
    before = _int(params.get("before"), "before")
    with pool.connection() as conn:
        if kind == "group":
            letters = pages.group_dead_letters(conn, where, before=before)
        else:
            relay = pages.RelayFilter(where.topic, where.key, where.error, where.since, where.until)
            letters = pages.relay_dead_letters(conn, relay, before=before)
        jobs = replay_jobs.recent(conn, limit=5)
    shown = {name: value for name, value in params.items() if name not in ("before", "job")}
    return render(
        request, "dead_letters.html", who, kind=kind, letters=letters, filters=shown, groups=CONSUMER_GROUPS, jobs=jobs
    )


@router.post("/replay-jobs/{job_id}/cancel")
def cancel_replay_job(
    request: Request, *, who: Who, pool: Pool, job_id: int, reason: Reason = "", csrf: Csrf = ""
) -> Response:
    """Cancel a running replay job (what it replayed stays replayed)."""
    from pin.console import replay_jobs

    access.acting(request, who, csrf)
    with pool.connection() as conn:
        replay_jobs.cancel(conn, job_id, actions.Said(who.actor, _reason(reason), {"job": job_id}))
    return RedirectResponse(f"{access.PREFIX}/dead-letters?job={job_id}", status_code=303)


@router.get("/dead-letters/{kind}/{letter_id}")
def dead_letter(request: Request, who: Who, pool: Pool, kind: str, letter_id: int) -> HTMLResponse:
    """One dead letter (``kind`` group or relay): payload, headers, error and attempts (a relay's letter: the
    rows of its key it holds back)."""
    read = {"group": _group_letter, "relay": _relay_letter}.get(kind)
    if read is None:
        raise ConsoleRefusal(404, f"no kind of dead letter {kind!r}")
    with pool.connection() as conn:
        shown = read(conn, letter_id)
    if shown is None:
        raise ConsoleRefusal(404, f"no dead letter {letter_id}")
    return render(request, f"{kind}_letter.html", who, **shown)


def _group_letter(conn: Any, letter_id: int) -> dict[str, Any] | None:
    """A group's letter as its page shows it: every byte as text (the template escapes it)."""
    letter = index.one(conn, letter_id)
    if letter is None:
        return None
    headers = [(name, pages.shown_bytes(value)) for name, value in letter["headers"]]
    payload, key = pages.shown_bytes(letter["message_value"]), pages.shown_bytes(letter["message_key"])
    return {"letter": letter, "payload": payload, "key": key, "headers": headers}


def _relay_letter(conn: Any, outbox_id: int) -> dict[str, Any] | None:
    """The relay's letter as its page shows it: its payload and headers as indented JSON."""
    letter = pages.relay_dead_letter(conn, outbox_id)
    if letter is None:
        return None
    shown = {
        name: json.dumps(letter[name], indent=2, ensure_ascii=False, sort_keys=True) for name in ("payload", "headers")
    }
    return {"letter": letter, **shown}


@router.get("/keys")
def key_search(key: str = "") -> Response:
    """The header's key search: to the key's page."""
    if not key.strip():
        return RedirectResponse(access.PREFIX, status_code=303)
    return RedirectResponse(f"{access.PREFIX}/keys/{quote(key.strip()[:200], safe='')}", status_code=303)


@router.get("/keys/{key:path}")
def key(request: Request, who: Who, pool: Pool, key: str) -> HTMLResponse:
    """Everything about one message key, and why it is not moving."""
    with pool.connection() as conn:
        view = pages.key_view(conn, key[:200])
    return render(request, "key.html", who, view=view)


@router.get("/audit")
def audit_page(request: Request, who: Who, pool: Pool) -> HTMLResponse:
    """Every operator action, newest first."""
    with pool.connection() as conn:
        records = pages.recent_audit(conn)
    return render(request, "audit.html", who, records=records)


def install(app: FastAPI) -> None:
    """Serve the console on ``app``: its routes, its static files, its refusals as pages, its security headers."""
    app.include_router(router)
    app.mount(f"{access.PREFIX}/static", StaticFiles(packages=[("pin.console", "static")]), name="console-static")
    app.add_middleware(access.SecurityHeaders)

    @app.exception_handler(ConsoleRefusal)
    def _refused(request: Request, refusal: ConsoleRefusal) -> HTMLResponse:
        if refusal.status == 401:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return render(request, "login.html", None, status=401, message=refusal.message, next=target)
        return render(request, "refused.html", None, status=refusal.status, message=refusal.message)


# --- actions (role operator; a reason; from a session, its CSRF token) ---------------------------------------

Reason = Annotated[str, Form(max_length=500)]
Csrf = Annotated[str, Form(max_length=128)]


def _reason(reason: str) -> str:
    if not reason.strip():
        raise ConsoleRefusal(400, "a reason is required")
    return reason.strip()


@router.post("/pauses")
def pause_or_resume(
    request: Request,
    *,
    who: Who,
    pool: Pool,
    kind: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
    action: Annotated[str, Form()] = "",
    reason: Reason = "",
    csrf: Csrf = "",
) -> Response:
    """Pause or resume a worker job or a consumer group for the whole cluster."""
    access.acting(request, who, csrf)
    try:
        with pool.connection() as conn:
            actions.pause_or_resume(conn, kind=kind, name=name, action=action, actor=who.actor, reason=_reason(reason))
    except actions.ActionError as exc:
        raise ConsoleRefusal(400, str(exc)) from None
    back = f"{access.PREFIX}/groups/{name}" if kind == "group" else f"{access.PREFIX}/jobs"
    return RedirectResponse(back, status_code=303)


@router.post("/dead-letters/act")
async def dead_letters_act(request: Request, who: Who, pool: Pool) -> Response:
    """Replay (a dry run first) or discard the selected letters, or every letter matching the filter."""
    form = await request.form()
    fields = {name: str(value) for name, value in form.items() if isinstance(value, str)}
    access.acting(request, who, fields.get("csrf"))
    reason = _reason(fields.get("reason", ""))
    kind, action = fields.get("kind", "group"), fields.get("action", "")
    if kind not in ("group", "relay") or action not in ("replay-dry-run", "replay", "discard"):
        raise ConsoleRefusal(400, "kind is group or relay; action is replay-dry-run, replay or discard")
    ids = [int(value) for value in form.getlist("id") if isinstance(value, str) and value.isdecimal()]
    if fields.get("scope") == "filter":
        where = _letter_filter({name[2:]: value for name, value in fields.items() if name.startswith("f_")})
        target: dict[str, Any] = {"kind": kind, "filter": where.described()}
    elif ids:
        where = LetterFilter(ids=tuple(ids[: actions.ACTION_LIMIT + 1]))
        target = {"kind": kind, "ids": ids}
    else:
        raise ConsoleRefusal(400, "select at least one letter, or apply to every letter matching the filter")
    act = _Act(who, kind, action, where, target, reason)
    return await run_in_threadpool(_act, request, pool, act)


@dataclass(frozen=True)
class _Act:
    """One dead-letter action as the form asked for it."""

    who: Viewer
    kind: str  # group or relay
    action: str  # replay-dry-run, replay or discard
    where: LetterFilter
    target: dict[str, Any]  # what the audit record names
    reason: str


def _act(request: Request, pool: Any, act: _Act) -> Response:
    """Select the letters (at most a page), then the dry run's page, or the action and its record's page."""
    try:
        with pool.connection() as conn:
            try:
                letters, preview = _selected(conn, act)
            except actions.TooManyLettersError:
                if act.action == "discard":
                    raise
                return _as_job(request, conn, act)
            if act.action == "replay-dry-run":
                return render(request, "dry_run.html", act.who, preview=preview, reason=act.reason, job=None)
            record = _do(conn, _settings(request), act, letters)
    except actions.ActionError as exc:
        raise ConsoleRefusal(400, str(exc)) from None
    return render(request, "done.html", act.who, record=record)


def _as_job(request: Request, conn: Any, act: _Act) -> Response:
    """More letters than a page (a group's or the relay's): the dry run of the first page and how many match; the
    replay, a job."""
    from pin.console import replay_jobs

    if act.action == "replay":
        said = actions.Said(act.who.actor, act.reason, act.target)
        job_id = replay_jobs.start(conn, act.where, said, kind=act.kind)
        return RedirectResponse(f"{access.PREFIX}/dead-letters?job={job_id}", status_code=303)
    if act.kind == actions.RELAY:
        first = pages.relay_dead_letters(conn, pages.RelayFilter.of(act.where), before=None, limit=actions.ACTION_LIMIT)
        preview = actions.preview_relay(first.rows)
    else:
        rows = index.page(conn, act.where, before=None, limit=actions.ACTION_LIMIT)
        preview = actions.preview_group(conn, [letter for row in rows if (letter := index.one(conn, int(row["id"])))])
    job = {"filter": act.where.described(), "letters": replay_jobs.matching(conn, act.where, kind=act.kind)}
    return render(request, "dry_run.html", act.who, preview=preview, reason=act.reason, job=job)


def _selected(conn: Any, act: _Act) -> tuple[list[dict[str, Any]], actions.Preview]:
    """The letters an action takes, and its dry run."""
    if act.kind == "group":
        letters = actions.select_group_letters(conn, act.where)
        return letters, actions.preview_group(conn, letters)
    relay = pages.RelayFilter.of(act.where)
    letters = pages.relay_dead_letters(conn, relay, before=None, limit=actions.ACTION_LIMIT + 1).rows
    if len(letters) > actions.ACTION_LIMIT:
        raise actions.TooManyLettersError(
            f"more than {actions.ACTION_LIMIT} letters match: narrow the filter, or replay them as a job"
        )
    return letters, actions.preview_relay(letters)


def _do(conn: Any, settings: Settings, act: _Act, letters: list[dict[str, Any]]) -> Any:
    """The replay or discard of ``letters``; its audit record."""
    said = actions.Said(act.who.actor, act.reason, act.target)
    if act.kind == "group" and act.action == "replay":
        return actions.replay_group(conn, settings, letters, said)[0]
    if act.kind == "group":
        return actions.discard_group(conn, letters, said)
    if act.action == "replay":
        return actions.replay_relay(conn, settings, letters, said)
    return actions.discard_relay(conn, letters, said)


@router.post("/held/park")
def park_held(
    request: Request,
    *,
    who: Who,
    group: Annotated[str, Form()] = "",
    topic: Annotated[str, Form()] = "",
    partition: Annotated[str, Form()] = "",
    offset: Annotated[str, Form()] = "",
    reason: Reason = "",
    csrf: Csrf = "",
) -> Response:
    """Park a message a consumer holds in retry: its holder dead-letters it at its next attempt (`pin dlq park`)."""
    from pin.messaging.consumer.dead_letters.park import ParkError, ParkTarget, park

    access.acting(request, who, csrf)
    target = ParkTarget(group, topic, _int(partition, "partition"), _int(offset, "offset"))
    try:
        parked = park(_settings(request), target, actor=who.actor, reason=_reason(reason), wait_seconds=0)
    except ParkError as exc:
        raise ConsoleRefusal(400, str(exc)) from None
    return render(request, "done.html", who, record=parked.record)
