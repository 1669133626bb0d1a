"""`pin status`: the snapshot printed once, as JSON, or refreshed in place until Ctrl-C."""

from __future__ import annotations

import json
import time

from rich.console import Console
from rich.live import Live

from pin.settings import Settings
from pin.status.collect import collect_status
from pin.status.render import render


def run_status(settings: Settings, *, watch: bool, interval: float, as_json: bool, kafka: bool = True) -> int:
    """Print the report once, as JSON, or refreshed in place until Ctrl-C; returns the exit code."""
    if as_json:
        print(json.dumps(collect_status(settings, kafka=kafka).document(), default=str, sort_keys=True))  # noqa: T201
        return 0
    # a pipe gets a wide page rather than rich's 80 columns; a terminal gets its own width
    console = Console() if Console().is_terminal else Console(width=160)
    if not watch:
        console.print(render(collect_status(settings, kafka=kafka)))
        return 0
    try:
        if console.is_terminal:
            with Live(render(collect_status(settings, kafka=kafka)), console=console, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(render(collect_status(settings, kafka=kafka)), refresh=True)
        else:  # piped: one report after another
            while True:
                console.print(render(collect_status(settings, kafka=kafka)))
                console.rule()
                time.sleep(interval)
    except KeyboardInterrupt:
        return 0
