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


def run_expire_promotions(*, once: bool) -> dict[str, int] | None:
    """`pin worker expire-promotions`: expire due purchases until SIGTERM/SIGINT, or (``once``) one cycle."""
    from pin.jobs.runner import JobRunner, RunnerConfig
    from pin.promotion.worker import ExpirePromotionsConfig, ExpirePromotionsJob

    context = start_role("expire-promotions", metrics=not once)
    settings = context.settings
    pool = create_pool(settings.require_database_url(), min_size=1, max_size=2, name="expire-promotions")
    try:
        interval = settings.expire_promotions_interval_seconds
        config = ExpirePromotionsConfig(batch_size=settings.expire_promotions_batch_size, poison_retry_seconds=interval)
        job = ExpirePromotionsJob(pool, config)
        if once:
            return dict(job.run_once().as_dict())
        JobRunner(job, RunnerConfig(interval_seconds=interval), context.stop).run()
        return None
    finally:
        pool.close()
