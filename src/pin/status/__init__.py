"""`pin status`: backlogs, lags and last cycles for an operator at 3 a.m., read with cheap bounded queries (safe
against production, refreshed every few seconds with ``--watch``); what cannot be read shows "n/a" and why."""

from pin.status.collect import collect_status
from pin.status.command import run_status
from pin.status.render import render
from pin.status.snapshot import Snapshot, Unavailable

__all__ = ["Snapshot", "Unavailable", "collect_status", "render", "run_status"]
