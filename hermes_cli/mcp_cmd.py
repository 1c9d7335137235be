"""``hermes-editor mcp [list] [--json]`` and ``mcp test NAME``: the MCP servers of config.toml.

The listing never shows env or header values (only their names), and URLs lose their query
string and user part, where some servers take an API key.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_cli.json_out import add_json_flag, emit

if TYPE_CHECKING:
    from core.config import Config, McpServerConfig

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``mcp`` subcommand (bare ``mcp`` lists the servers)."""
    mcp = commands.add_parser(
        "mcp",
        help="the MCP servers of config.toml: list them, test one",
        description="MCP servers configured as [mcp_servers.NAME] in config.toml; every session on every surface gets their tools.",
    )
    add_json_flag(mcp)
    actions = mcp.add_subparsers(dest="action", metavar="ACTION")
    add_json_flag(actions.add_parser("list", help="the configured servers: transport, enabled, what runs (the default)"))
    test = actions.add_parser("test", help="connect to one server, list its tools; exit status 0 when it works, 1 when not")
    test.add_argument("name", help="the server's name, as in [mcp_servers.NAME]")
    test.add_argument("--cwd", type=Path, default=None, help="where a stdio server without its own cwd runs (default: here)")
    test.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for it to start (default 30)")


def run(args: argparse.Namespace) -> int:
    from core.config import ConfigError, load_config

    try:
        config = load_config()
    except ConfigError as exc:
        print(f"The configuration does not load: {exc}", file=sys.stderr)
        return 1
    if args.action == "test":
        return _test(config, args.name, (args.cwd or Path.cwd()).resolve(), args.timeout)
    return _list(config, as_json=args.json)


def _row(name: str, server: McpServerConfig) -> dict[str, Any]:
    from core.tools.mcp_client import _display_url
    from hermes_cli.redact import redact

    return {
        "name": name,
        "transport": server.kind,
        "enabled": server.enabled,
        "command": redact(server.command) if server.command else None,
        "args": [redact(arg) for arg in server.args],
        "cwd": server.cwd,
        "url": _display_url(server.url) if server.url else None,
        "env": sorted(server.env),  # names only: values may be secrets
        "headers": sorted(server.headers),
    }


def _list(config: Config, *, as_json: bool) -> int:
    from core.config import config_path

    rows = [_row(name, server) for name, server in config.mcp_servers.items()]
    if as_json:
        return emit(rows)
    if not rows:
        print(f"No MCP servers in {config_path()}. Add one as [mcp_servers.NAME] (see the README's configuration section).")
        return 0
    table = [("NAME", "TRANSPORT", "ENABLED", "RUNS")]
    for row in rows:
        target = row["url"] or shlex.join([row["command"], *row["args"]])
        extra = [f"{key}: {', '.join(row[key])}" for key in ("env", "headers") if row[key]]
        table.append(
            (row["name"], row["transport"], "yes" if row["enabled"] else "no", target + (f"  ({'; '.join(extra)})" if extra else ""))
        )
    widths = [max(len(line[i]) for line in table) for i in range(3)]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line[:3], widths)) + "  " + line[3])
    return 0


def _test(config: Config, name: str, cwd: Path, timeout: float) -> int:
    from core.config import config_path
    from core.tools.mcp_client import McpServerSpec, probe
    from hermes_cli.redact import redact

    server = config.mcp_servers.get(name)
    if server is None:
        names = sorted(config.mcp_servers)
        if not names:
            print(f"No MCP servers in {config_path()}; add one as [mcp_servers.NAME].", file=sys.stderr)
            return 1
        nearest = difflib.get_close_matches(name, names, n=1)
        hint = f" Did you mean '{nearest[0]}'?" if nearest else ""
        print(f"No MCP server '{name}' in {config_path()}.{hint} Configured: {', '.join(names)}.", file=sys.stderr)
        return 1
    if not server.enabled:
        print(f"'{name}' is disabled (enabled = false): sessions do not connect to it. Testing it anyway.")
    import logging

    # Its notices are this command's own output here, not log lines on stderr.
    logging.getLogger("core.tools.mcp_client").addHandler(logging.NullHandler())
    logging.getLogger("core.tools.mcp_client").propagate = False
    spec = McpServerSpec.from_config(name, server)
    started = time.monotonic()
    tools, problem = asyncio.run(probe(spec, cwd=cwd, timeout=timeout))
    if problem is not None:
        print(redact(f"✗ {name} ({server.kind}): could not connect: {problem}"), file=sys.stderr)
        return 1
    print(f"✓ {name} ({server.kind}): connected in {time.monotonic() - started:.1f} s; {len(tools)} tool{'s' if len(tools) != 1 else ''}")
    width = max((len(tool.name) for tool in tools), default=0)
    for tool in tools:
        summary = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        marker = "read-only" if tool.read_only else "asks"
        print(redact(f"  {tool.name.ljust(width)}  [{marker}] {summary[:100]}"))
    return 0
