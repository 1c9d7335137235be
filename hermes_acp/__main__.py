"""``hermes-acp``: the ACP agent server an editor spawns. stdout carries JSON-RPC only."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
from typing import TYPE_CHECKING

from core.version import version
from hermes_acp.handshake import EarlyAnswers

if TYPE_CHECKING:
    from core.config import Config
    from core.logs import RedactingFilter

__all__ = ["main"]

TERMINAL_NOTE = (
    "hermes-acp: the hermes-editor agent server for editors (ACP over stdin/stdout). "
    "Start it from your editor (Zed, JetBrains, VS Code); see the README. Ctrl-C quits."
)


def _protect_stdout() -> int:
    """Keep fd 1 for protocol messages only.

    The protocol gets a private copy of stdout; fd 1 itself then points at stderr, so a stray
    print, a library's warning or a child process that inherits stdout cannot corrupt the stream.
    """
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_fd


class _Loader(threading.Thread):
    """Loads the config, then imports the SDK and the server, while the main thread reads stdin."""

    def __init__(self) -> None:
        super().__init__(name="hermes-acp-loader", daemon=True)
        self.config: Config | None = None
        self.redactor: RedactingFilter | None = None
        self.error: BaseException | None = None
        self._config_loaded = threading.Event()

    def run(self) -> None:
        try:
            from core.config import ConfigError, load_config
            from core.logs import setup_logging

            try:
                self.config = load_config()
            except ConfigError:
                self.config = None
            self.redactor = setup_logging("acp", self.config.log_level if self.config else "info")
            self._config_loaded.set()
            from hermes_acp.sdk_load import load_sdk

            load_sdk()  # the slow part
            import hermes_acp.server  # noqa: F401
        except BaseException as exc:  # re-raised in the main thread
            self.error = exc
        finally:
            self._config_loaded.set()

    def loaded_config(self) -> Config | None:
        """The config once loaded (None when it is invalid: the server then says why)."""
        self._config_loaded.wait()
        return self.config

    def result(self) -> RedactingFilter | None:
        """The log redactor, once the loader has finished (its error, if any, is raised here)."""
        self.join()
        if self.error is not None:
            raise self.error
        return self.redactor


async def _serve(read_fd: int, protocol_fd: int, redactor: RedactingFilter | None, early: EarlyAnswers | None) -> None:
    from acp.agent.connection import AgentSideConnection

    from hermes_acp.server import HermesAgent
    from hermes_acp.transport import StdioTransport

    if early is None:
        transport = StdioTransport(read_fd, protocol_fd)
    else:
        transport = StdioTransport(read_fd, protocol_fd, replay=early.replay, rest=early.rest, answered=early.answered)
    await transport.start()
    agent = HermesAgent(transport=transport, redactor=redactor, given_session_ids=early.session_ids if early else ())
    conn = AgentSideConnection(agent, transport, listening=False, use_unstable_protocol=True)
    try:
        await conn.listen()
        # stdin is closed: running turns stop, but what the client asked before is still done.
        agent.stop_turns()
        await transport.answered_all(timeout=10)
    finally:
        await asyncio.shield(agent.aclose())
        await asyncio.shield(conn.close())


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv)[:1] in (["--version"], ["-V"]):
        # Answered before the state home is touched and before anything else loads.
        print(f"hermes-acp {version()}")
        return 0
    from core.state_home import PROFILE_HELP, enter_home

    parser = argparse.ArgumentParser(
        prog="hermes-acp",
        description="Agent Client Protocol server for editors (Zed, JetBrains, VS Code). Speaks JSON-RPC on stdio.",
    )
    parser.add_argument("--setup", action="store_true", help="configure a provider and model interactively, then exit")
    parser.add_argument("--profile", metavar="NAME", help=PROFILE_HELP + "; made on first use")
    parser.add_argument("-V", "--version", action="version", version=f"hermes-acp {version()}")
    args = parser.parse_args(argv)
    # The profile decides the home: nothing may touch it before (an editor's first start makes the profile).
    if (code := enter_home("hermes-acp", args.profile, create=True)) is not None:
        return code
    if args.setup:
        from surface_support.setup_wizard import run_setup

        return run_setup()
    try:
        if os.isatty(0):
            # Started by hand: say what this is; editors start it with pipes and see nothing of this.
            print(TERMINAL_NOTE, file=sys.stderr, flush=True)
        return _run()
    except KeyboardInterrupt:
        from surface_support.interrupt import end_by_sigint

        return end_by_sigint()


def _run() -> int:
    """Serve ACP on stdin/stdout until the client goes away."""
    from hermes_acp import startup_gc

    startup_gc.pause()  # resumed once the first prompt is answered
    protocol_fd = _protect_stdout()
    read_fd = os.dup(0)
    loader = _Loader()
    loader.start()
    early = None
    if not os.environ.get("HERMES_ACP_NO_FAST_INIT"):
        # Answer initialize and session/new while the SDK loads (see hermes_acp.handshake).
        early = EarlyAnswers(read_fd, protocol_fd, loader.loaded_config)
        early.run()
        if early.eof and not early.replay and not early.rest:
            return 0  # the client went away before saying anything
    redactor = loader.result()
    try:
        asyncio.run(_serve(read_fd, protocol_fd, redactor, early))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
