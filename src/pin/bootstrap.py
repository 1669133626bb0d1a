"""The composition root: where settings, pools, producers, jobs and the API are built. Nothing is built
at import time anywhere else."""

from __future__ import annotations

import uvicorn

from pin.api.app import create_app
from pin.db import create_pool
from pin.roles import start_role


def run_api(*, host: str, port: int) -> None:
    """Serve the HTTP API until SIGTERM/SIGINT."""
    context = start_role("api", metrics=False)
    pool = create_pool(context.settings.require_database_url(), max_size=20, name="api")
    try:
        app = create_app(context.settings, pool)
        config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False)
        server = uvicorn.Server(config)
        server.run()
    finally:
        pool.close()
