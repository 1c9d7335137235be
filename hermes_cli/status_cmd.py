"""``hermes-editor status [--json]``: which surfaces run, which sandbox, which model, and the store's size."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

__all__ = ["collect", "register", "run"]


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``status`` subcommand."""
    status = commands.add_parser("status", help="which surfaces run, which sandbox, which model, the store's size")
    status.add_argument("--json", action="store_true", help="print one JSON object")


def _when(epoch: float | None) -> str:
    return "-" if epoch is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _gateways() -> list[dict[str, Any]]:
    """Each bot's gateway, running when its lock is held (as ``gateway status`` tells)."""
    from core.config import home
    from hermes_cli.gateway_cmds import _lock_held

    directory = home() / "gateway"
    found = []
    for path in sorted(directory.glob("bot-*.json")) if directory.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found.append(
            {"bot": path.stem, "running": _lock_held(path.with_suffix(".lock")), "pid": data.get("pid"), "heartbeat": data.get("heartbeat")}
        )
    return found


def _last_logged(surface: str) -> float | None:
    from core.config import home

    try:
        return (home() / "logs" / f"{surface}.log").stat().st_mtime
    except OSError:
        return None


def _model() -> dict[str, Any]:
    from core.config import ConfigError, load_config

    try:
        config = load_config()
        if config.model:
            config.model_ref()
    except ConfigError as exc:
        from hermes_cli.redact import redact

        return {"model": None, "error": redact(str(exc))}
    return {"model": config.model, "error": None}


async def _store() -> dict[str, Any]:
    from core.config import home

    path = home() / "state.db"
    if not path.exists():
        return {"path": str(path), "exists": False, "size_bytes": 0, "sessions": 0}
    from core.store import SessionStore
    from core.store.session_admin import stats

    async with SessionStore.open(path) as store:
        found = await stats(store)
    return {"path": str(path), "exists": True, "size_bytes": found.size_bytes, "sessions": found.sessions}


def collect() -> dict[str, Any]:
    """Everything ``status`` reports, as plain data."""
    from core.host.sandbox import status as sandbox_status

    gateways = _gateways()
    surfaces: dict[str, Any] = {
        # Nothing records a running hermes-acp or hermes-mcp (the editor starts and stops them).
        name: {"running": None, "tracked": False, "last_logged": _last_logged(name)}
        for name in ("acp", "mcp")
    }
    surfaces["gateway"] = {
        "running": any(g["running"] for g in gateways),
        "tracked": True,
        "last_logged": _last_logged("gateway"),
        "bots": gateways,
    }
    sandbox = sandbox_status()
    return {
        "surfaces": surfaces,
        "sandbox": {"name": sandbox.name, "detail": sandbox.detail},
        "model": _model(),
        "store": asyncio.run(_store()),
        "profile": _profile(),
    }


def _profile() -> dict[str, Any]:
    """The profile in use (None: the main home) and its state home."""
    from core.state_home import home_path, profile_name

    return {"name": profile_name(), "home": home_path()}


def _print(found: dict[str, Any]) -> None:
    profile = found["profile"]
    print(f"{'profile:':<16}{profile['name'] or 'default (the main home)'}  {_short(profile['home'])}")
    for name, surface in found["surfaces"].items():
        label = f"hermes-{name}:"
        if not surface["tracked"]:
            state = "not tracked"
        elif surface["running"]:
            pids = ", ".join(str(b["pid"]) for b in surface["bots"] if b["running"])
            state = f"running (pid {pids})"
        else:
            state = "not running"
        logged = surface["last_logged"]
        print(f"{label:<16}{state}" + (f"; last logged {_when(logged)}" if logged is not None else ""))
    sandbox = found["sandbox"]
    print(f"{'sandbox:':<16}{sandbox['detail'] if sandbox['name'] else 'none (' + sandbox['detail'] + ')'}")
    model = found["model"]
    if model["error"]:
        print(f"{'model:':<16}configuration error: {model['error']}")
    else:
        print(f"{'model:':<16}{model['model'] or 'none configured (run: hermes-editor setup)'}")
    store = found["store"]
    if store["exists"]:
        print(f"{'store:':<16}{store['size_bytes'] / 1_000_000:.1f} MB, {store['sessions']} sessions  {_short(store['path'])}")
    else:
        print(f"{'store:':<16}not created yet  {_short(store['path'])}")


def _short(path: str) -> str:
    user = str(Path.home())
    return "~" + path[len(user) :] if path.startswith(user + "/") else path


def run(args: argparse.Namespace) -> int:
    from hermes_cli.redact import redact

    found = collect()
    if args.json:
        print(redact(json.dumps(found, indent=2)))
    else:
        _print(found)
    return 0
