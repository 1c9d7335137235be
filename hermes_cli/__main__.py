"""``hermes-editor``: the admin CLI. Set-up, doctor, a live demo, and the session history.

Subcommands import what they need when they run, so ``--help`` stays quick.
"""

from __future__ import annotations

import argparse
import io
import os
import sys

from core.state_home import PROFILE_HELP
from core.version import version

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes-editor",
        description="Admin CLI for hermes-editor, the agent your editor talks to over ACP (hermes-acp).",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help=PROFILE_HELP + "; it must exist ('hermes-editor profiles create NAME'); before or after COMMAND",
    )
    parser.add_argument("-V", "--version", action="version", version=f"hermes-editor {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    commands.add_parser("setup", help="choose a provider, key and model; write config.toml")

    doctor = commands.add_parser("doctor", help="check the installation, configuration, model and store")
    doctor.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the model (default 30)")

    demo = commands.add_parser(
        "demo",
        help="run a real ACP session against hermes-acp in a throwaway project",
        description="Spawn hermes-acp and drive one real ACP session in a throwaway Python project. "
        "Uses your configured model, or a bundled scripted model on 127.0.0.1 when none is configured.",
    )
    demo.add_argument("--interactive", action="store_true", help="ask y/n for each approval instead of approving")
    demo.add_argument("--keep", action="store_true", help="keep the throwaway project and print its path")
    demo.add_argument("--scripted", action="store_true", help="use the bundled scripted model even if a model is configured")
    demo.add_argument("--timeout", type=float, default=600.0, help="seconds the turn may take (default 600)")

    from hermes_cli import approvals_cmd, checkpoints_cmd, config_cmd, import_cmd, memory_cmd, sessions_cmd, skills_cmd

    for module in (sessions_cmd, skills_cmd, memory_cmd, import_cmd, checkpoints_cmd, approvals_cmd):
        module.register(commands)
    config_cmd.register(commands)

    sessions_cmd.add_search_arguments(commands.add_parser("search", help="full-text search over past sessions (as sessions search)"))

    from hermes_cli.gateway_cmds import add_parsers as add_gateway_parsers

    add_gateway_parsers(commands)

    from hermes_cli import chat_cmd, completion_cmd, logs_cmd, model_cmd, status_cmd

    for module in (logs_cmd, status_cmd, completion_cmd, chat_cmd, model_cmd):
        module.register(commands)

    from hermes_cli import mcp_cmd

    mcp_cmd.register(commands)

    from hermes_cli import profiles_cmd

    profiles_cmd.register(commands)
    return parser


def _profile_first(argv: list[str]) -> list[str]:
    """``argv`` with every ``--profile NAME`` (or ``--profile=NAME``) moved before the command, so that
    ``hermes-editor sessions list --profile work`` means what it says; after ``--`` nothing moves."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        if arg == "--profile" and i + 1 < len(argv):
            front += argv[i : i + 2]
            i += 2
            continue
        if arg.startswith("--profile="):
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv)[:1] in (["--version"], ["-V"]):
        # Answered before the state home is touched and before the subcommands' modules load.
        print(f"hermes-editor {version()}")
        return 0
    if isinstance(sys.stdout, io.TextIOWrapper):
        # ✓ and ✗ must not crash a terminal with a narrow encoding.
        sys.stdout.reconfigure(errors="replace")
    parser = _parser()
    args = parser.parse_args(_profile_first(sys.argv[1:] if argv is None else argv))
    # The profile decides the home: nothing may touch it before. A missing one is refused (a typo
    # must not make an empty home), except by 'profiles', which works on the main home's list.
    if args.command == "profiles":
        from hermes_cli import profiles_cmd

        return profiles_cmd.run(args)
    from core.state_home import enter_home

    if (code := enter_home("hermes-editor", args.profile, create=False)) is not None:
        return code
    try:
        if args.command == "setup":
            from surface_support.setup_wizard import run_setup

            return run_setup()
        if args.command == "doctor":
            from hermes_cli.doctor import run_doctor

            return run_doctor(timeout=args.timeout)
        if args.command == "demo":
            from hermes_cli.demo import run_demo

            return run_demo(interactive=args.interactive, keep=args.keep, scripted=args.scripted, timeout=args.timeout)
        if args.command in ("sessions", "search"):
            from hermes_cli import sessions_cmd

            if args.command == "search":
                args.action = "search"
            return sessions_cmd.run(args)
        if args.command in ("skills", "memory", "import", "checkpoints", "approvals"):
            from hermes_cli import approvals_cmd, checkpoints_cmd, import_cmd, memory_cmd, skills_cmd

            modules = {
                "skills": skills_cmd,
                "memory": memory_cmd,
                "import": import_cmd,
                "checkpoints": checkpoints_cmd,
                "approvals": approvals_cmd,
            }
            return modules[args.command].run(args)
        if args.command == "config":
            from hermes_cli import config_cmd

            return config_cmd.run(args)
        if args.command in ("logs", "status", "chat", "model"):
            from hermes_cli import chat_cmd, logs_cmd, model_cmd, status_cmd

            return {"logs": logs_cmd, "status": status_cmd, "chat": chat_cmd, "model": model_cmd}[args.command].run(args)
        if args.command == "mcp":
            from hermes_cli import mcp_cmd

            return mcp_cmd.run(args)
        if args.command == "completion":
            from hermes_cli import completion_cmd

            return completion_cmd.run(args, parser)
        if args.command in ("gateway", "pairing", "cron"):
            from hermes_cli.gateway_cmds import run as run_gateway_command

            return run_gateway_command(args)
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, and keep the exit-time flush from failing too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
