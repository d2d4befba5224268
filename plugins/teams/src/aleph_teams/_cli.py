"""``aleph scheduler``: the teams scheduler and dispatcher as a foreground command."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from typing import Any

__all__ = ["add_scheduler_parser"]


def add_scheduler_parser(sub: Any) -> None:
    """Register ``aleph scheduler``."""
    p = sub.add_parser(
        "scheduler",
        help="run cron jobs, heartbeats and ready team tasks",
        description="Run the teams scheduler (cron jobs, heartbeats) and dispatcher (ready tasks, crash orphans) "
        "until interrupted. Each run is an unattended turn through the permission chokepoint.",
    )
    p.add_argument("--once", action="store_true", help="run what is due now, then exit")
    p.add_argument("--for-seconds", type=float, default=None, metavar="S", help="stop after S seconds")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    import aleph
    from aleph_teams._service import Scheduler

    async with aleph.load(args.config, workspace=args.workspace) as rt:
        entry = rt.registry.get("cron_manage")
        if entry is None:
            print("error: the teams plugin is not loaded (aleph plugins says why)", file=sys.stderr)
            return 1
        host = entry.tool.host  # type: ignore[attr-defined]
        if args.once:
            scheduler = Scheduler(host)
            now = time.time()
            ran = 0
            for job in host.store.due("cron", now):
                ran += len(await scheduler.fire_cron(job, now))
            for beat in host.store.due("heartbeat", now):
                ran += 1 if await scheduler.fire_heartbeat(beat, now) else 0
            print(f"{ran} scheduled run(s)")
            return 0
        names = await rt.start_services()
        print(f"running: {', '.join(names)}", file=sys.stderr)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await asyncio.wait_for(stop.wait(), args.for_seconds)
        except TimeoutError:
            pass
    return 0
