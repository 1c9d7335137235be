"""``hermes-gateway run``: the chat platforms' gateway and the cron scheduler, in the foreground.

A platform unreachable or refusing at start-up stops neither the others nor the scheduler: it
is retried with capped, jittered backoff (1s doubling to 5 minutes; a rejected credential at
the 5-minute pace); every failure is logged, and ``hermes-editor gateway status`` shows the state.

SIGTERM and SIGINT stop it gracefully at any point (also while a platform is being retried): no
new messages are taken, turns and cron runs in flight get ``[gateway] shutdown_grace`` seconds
to finish, and what is still running then is cancelled (the core saves what was said, and the
run is recorded as interrupted).

With no platform configured it runs the scheduler only: due jobs run and their results
are kept in the store (``hermes-editor cron runs``); nothing is sent to a chat.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from core.state_home import PROFILE_HELP
from core.version import version

__all__ = ["main"]

log = logging.getLogger("hermes_gateway")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes-gateway",
        description="Messaging gateway (Telegram, Discord, Slack, WhatsApp, Signal, Matrix, email) and cron scheduler for hermes-editor.",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help=PROFILE_HELP + "; it must exist ('hermes-editor profiles create NAME'), so that a typo starts no empty bot",
    )
    parser.add_argument("-V", "--version", action="version", version=f"hermes-gateway {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser("run", help="run in the foreground until SIGTERM/SIGINT (what the service units start)")
    run.add_argument("--profile", metavar="NAME", default=argparse.SUPPRESS, help="as hermes-gateway --profile NAME run")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers are in place
        return 130


def _main(argv: list[str] | None) -> int:
    if (sys.argv[1:] if argv is None else argv)[:1] in (["--version"], ["-V"]):
        # Answered before the state home is touched and before anything else loads.
        print(f"hermes-gateway {version()}")
        return 0
    from core.state_home import enter_home

    parser = _parser()
    args = parser.parse_args(argv)
    # The profile decides the home: nothing may touch it before.
    if (code := enter_home("hermes-gateway", args.profile, create=False)) is not None:
        return code
    if args.command != "run":
        parser.print_help(sys.stderr)
        return 2
    from core.config import ConfigError, load_config
    from core.logs import setup_logging

    try:
        config = load_config()
    except ConfigError as exc:
        print(f"hermes-gateway: {exc}", file=sys.stderr)
        return 2
    redactor = setup_logging("gateway", config.log_level)
    redactor.add(config.secrets)
    # Platform libraries log request URLs and payloads (a Telegram URL contains the token) at debug level.
    for noisy in (
        "telegram",
        "httpx",
        "apscheduler",
        "discord",
        "slack_bolt",
        "slack_sdk",
        "nio",
        "mautrix",
        "aioimaplib",
        "aiosmtplib",
        "aiohttp",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from hermes_gateway.app import Gateway, GatewayError, lock_token
    from hermes_gateway.lock import AlreadyRunning, GatewayLock

    if not config.model:
        print("hermes-gateway: no model is configured; run 'hermes-editor setup' (or set HERMES_MODEL).", file=sys.stderr)
        return 2
    try:
        gateway = Gateway(config)
    except GatewayError as exc:
        print(f"hermes-gateway: {exc}", file=sys.stderr)
        return 2
    lock = GatewayLock(lock_token(config))
    try:
        lock.acquire()
    except AlreadyRunning as exc:
        print(f"hermes-gateway: {exc}", file=sys.stderr)
        return 1
    gateway.lock = lock
    if not gateway.platform:
        line = "no platform configured (no Telegram token, no other platform's section): running scheduled jobs only; results are kept in 'hermes-editor cron runs'"
        log.info(line)
        print(f"hermes-gateway: {line}", flush=True)
    try:
        return asyncio.run(_serve(gateway))
    except KeyboardInterrupt:
        return 130
    finally:
        lock.release()


async def _serve(gateway) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(name: str) -> None:
        if not stop.is_set():
            log.info("%s: stopping", name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    try:
        await gateway.open()
        gateway.write_status("starting")
        await gateway.serve(stop)
    except Exception:
        log.exception("the gateway failed")
        await gateway.close()
        return 1
    log.info("gateway stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
