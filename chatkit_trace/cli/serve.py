"""``chatkit-trace serve TRACE|FIXTURE --port N``: recorded traffic as a fake backend.

Runs :class:`chatkit_trace.fixtures.server.ReplayServer` (aiohttp) on
127.0.0.1 until Ctrl-C: recorded routes answer with recorded responses (SSE
with the recorded timing, ``--speed 10`` or ``--speed max``; history JSON;
accepted responses; WebSocket messages); anything else gets a 404 naming the
closest recorded route.  Point the chatkit UI (or ``redrive``) at it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from ..errors import UsageError

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a recording or fixture as a fake backend (recorded routes, recorded responses and timing)",
        description="Answer recorded routes with recorded responses: SSE streams with the recorded timing, history "
        "JSON, accepted responses, WebSocket messages. A request that matches no recording gets a 404 naming the "
        "closest recorded route; GET /__chatkit__/routes lists them all.",
    )
    p.add_argument("source", metavar="TRACE|FIXTURE", help="a trace database or a *.chatkit.json fixture (HAR/flow with --profile)")
    p.add_argument("--port", "-p", type=int, default=8800, help="port to listen on (default 8800; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--speed", default="1", metavar="1|10|max", help="replay speed: times faster than recorded, or max (default 1)")
    p.add_argument("--session", "-s", metavar="S", help="serve only this session's exchanges")
    p.add_argument("--profile", metavar="P", help="profile (for a HAR/flow input and for matching new ids by route)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..fixtures.server import parse_speed

    try:
        speed = parse_speed(args.speed)
    except ValueError as err:
        raise UsageError(f"--speed: {err}") from None
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0..65535, not {args.port}")
    try:
        asyncio.run(_main(args, speed))
    except OSError as err:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}") from None
    return 0


async def _main(args: argparse.Namespace, speed: float | None) -> None:
    from aiohttp import web

    from ..fixtures.server import ROUTES_PATH, ReplayServer, load_exchanges

    exchanges, profile, _ = load_exchanges(args.source, session=args.session, profile=args.profile)
    server = ReplayServer(exchanges, speed=speed, profile=profile, label=str(args.source))
    runner = web.AppRunner(server.app(), shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    port = sockets[0].getsockname()[1] if sockets else args.port
    routes = server.routes()
    shown = "max" if speed is None else f"{speed:g}x"
    print(f"serving {len(exchanges)} recorded exchange(s) on {len(routes)} route(s) of {args.source} at "
          f"http://{args.host}:{port} (speed {shown}); routes: http://{args.host}:{port}{ROUTES_PATH}; Ctrl-C stops",
          flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        server._stop.set()
        await runner.cleanup()
        print(f"served {len(server.log)} request(s)", file=sys.stderr)
