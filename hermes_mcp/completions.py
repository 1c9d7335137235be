"""``completion/complete``: suggestions for the arguments of our prompts and the variables of our resource templates.

What is suggested for what was typed so far:

- ``hermes://sessions/{session_id}`` (and any ``session_id``): ids of the conversations whose id,
  or whose title or a word of it, starts with it (case ignored), most recently active first;
  sessions subagents ran in are left out (they are read inside their parent);
- ``hermes://skills/{name}`` (and any ``skill``): skill names that start with it, then those
  that contain it, from the same folders the resource reads;
- ``hermes://memory/{file}``: ``MEMORY.md`` and ``USER.md``;
- an argument named ``cwd`` or ``project``: the folders tasks may work in (the client's roots,
  ``[mcp] projects``, and where this server's tasks ran), by path or by folder name; once a
  path inside one of them is typed, its subfolders;
- an argument named ``model``: the configured models (``Config.model_choices``), by label or
  by the name after the provider;
- a skill prompt's ``task``: free text, nothing to suggest.

At most 100 values (the protocol's limit) with ``total`` and ``hasMore``. A prompt, template
or argument we do not offer gets an empty answer rather than an error: clients probe.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.learning import memory, skills

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from hermes_mcp.runtime import Runtime

__all__ = ["MAX_VALUES", "Found", "install_completions", "model_values", "project_values"]

log = logging.getLogger(__name__)

MAX_VALUES = 100  # the protocol caps a completion's values
ROOTS_SECONDS = 2.0
MAX_LISTED = 2000  # entries of one folder looked at for subfolder suggestions

# (values shown, total matches)
Found = tuple[list[str], int]
Provider = Callable[["ServerRequestContext[Any, Any]", str], Awaitable[Found]]


def _capped(matches: list[str]) -> Found:
    return matches[:MAX_VALUES], len(matches)


def _by_prefix(names: list[str], typed: str, *, containing: bool = False) -> list[str]:
    """``names`` that start with ``typed`` (case ignored), then, with ``containing``, those that contain it."""
    low = typed.lower()
    first = [n for n in names if n.lower().startswith(low)]
    rest = [n for n in names if low in n.lower() and n not in first] if containing and low else []
    return first + rest


class Completer:
    """Answers ``completion/complete`` for one server's prompts and templates."""

    def __init__(self, server: Any, runtime: Runtime) -> None:
        self._server = server
        self._runtime = runtime
        by_name: dict[str, Provider] = {
            "session_id": self._sessions,
            "skill": self._skills,
            "cwd": self._projects,
            "project": self._projects,
            "model": self._models,
        }
        self._by_name = by_name
        # Variables whose meaning comes from their template.
        self._by_template: dict[tuple[str, str], Provider] = {
            ("hermes://skills/{name}", "name"): self._skills,
            ("hermes://memory/{file}", "file"): self._memory_files,
        }

    async def complete(self, ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        from mcp_types import CompleteResult, Completion

        provider = await self._provider(params.ref, params.argument.name)
        values: list[str] = []
        total = 0
        if provider is not None:
            values, total = await provider(ctx, params.argument.value or "")
        return CompleteResult(completion=Completion(values=values, total=total, has_more=total > len(values)))

    async def _provider(self, ref: Any, argument: str) -> Provider | None:
        if getattr(ref, "type", None) == "ref/prompt":
            prompt = next((p for p in await self._server.list_prompts() if p.name == ref.name), None)
            if prompt is None or argument not in {a.name for a in prompt.arguments or []}:
                return None
            return self._by_name.get(argument)
        if getattr(ref, "type", None) == "ref/resource":
            template = next((t for t in await self._server.list_resource_templates() if t.uri_template == ref.uri), None)
            if template is None or argument not in re.findall(r"\{(\w+)\}", template.uri_template):
                return None
            return self._by_template.get((template.uri_template, argument)) or self._by_name.get(argument)
        return None

    # --- the suggestions ---------------------------------------------------------------

    async def _sessions(self, ctx: Any, typed: str) -> Found:
        store = await self._runtime.store()
        pattern = typed.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where = (
            "parent_call_id IS NULL AND (lower(id) LIKE ? ESCAPE '\\' OR lower(coalesce(title, '')) LIKE ? ESCAPE '\\'"
            " OR lower(coalesce(title, '')) LIKE ? ESCAPE '\\')"
        )
        args = (f"{pattern}%", f"{pattern}%", f"% {pattern}%")
        rows = await store.select(f"SELECT id FROM sessions WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT ?", (*args, MAX_VALUES))
        values = [row[0] for row in rows]
        total = len(values)
        if total == MAX_VALUES:
            counted = await store.select(f"SELECT COUNT(*) FROM sessions WHERE {where}", args)
            total = int(counted[0][0])
        return values, total

    async def _skills(self, ctx: Any, typed: str) -> Found:
        found = await asyncio.to_thread(skills.discover, list(self._runtime.projects))
        return _capped(_by_prefix([s.name for s in found], typed, containing=True))

    async def _memory_files(self, ctx: Any, typed: str) -> Found:
        return _capped(_by_prefix(list(memory.FILES.values()), typed))

    async def _projects(self, ctx: Any, typed: str) -> Found:
        allowed = self._runtime.allowed_projects(await _roots(ctx))
        for path in self._runtime.projects[1:]:  # where this server's tasks ran (the first is its own cwd)
            if path not in allowed:
                allowed.append(path)
        return _capped(await asyncio.to_thread(project_values, allowed, typed))

    async def _models(self, ctx: Any, typed: str) -> Found:
        config = self._runtime.load_config()
        return _capped(model_values(config.model_choices() if config else [], typed))


def project_values(allowed: list[Path], typed: str) -> list[str]:
    """Folders among ``allowed`` for ``typed``: by path or folder name, or, for a path inside one, its subfolders."""
    from core.paths import within

    shown = [str(p) for p in allowed]
    if not typed:
        return shown
    if not typed.startswith(("/", "~")):
        low = typed.lower()
        return [s for s, p in zip(shown, allowed, strict=True) if p.name.lower().startswith(low) or s.lower().startswith(low)]
    given = os.path.expanduser(typed)
    out = [s for s in shown if s.startswith(given)]
    folder, _, start = given.rpartition("/")
    parent = Path(folder or "/").resolve()
    if not within(parent, allowed):
        return out
    try:
        with os.scandir(parent) as entries:
            names = []
            for count, entry in enumerate(entries):
                if count >= MAX_LISTED:
                    break
                if entry.name.startswith(start) and (start.startswith(".") or not entry.name.startswith(".")) and entry.is_dir():
                    names.append(entry.name)
    except OSError:
        return out
    for name in sorted(names):
        path = str(parent / name)
        if path not in out:
            out.append(path)
    return out


def model_values(choices: list[str], typed: str) -> list[str]:
    """Model labels (``provider:model``) that start with ``typed``, or whose model name does."""
    low = typed.lower()
    return [c for c in choices if c.lower().startswith(low) or c.partition(":")[2].lower().startswith(low)]


async def _roots(ctx: Any) -> list[Path]:
    """The client's ``file://`` roots, in the handshake era (the 2026 era asks with input_required,
    which a completion cannot carry: there only configured projects are suggested)."""
    import warnings
    from urllib.parse import unquote, urlparse

    import anyio
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    caps = ctx.session.client_capabilities
    if caps is None or caps.roots is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated in the 2026 era, not in this one
            with anyio.fail_after(ROOTS_SECONDS):
                found = (await ctx.session.list_roots()).roots
    except Exception:
        log.debug("the client declared roots but did not list them", exc_info=True)
        return []
    out = []
    for root in found:
        uri = urlparse(str(root.uri))
        if uri.scheme == "file" and uri.netloc in ("", "localhost") and uri.path:
            out.append(Path(unquote(uri.path)).resolve())
    return out


def install_completions(server: Any, runtime: Runtime) -> Completer:
    """The ``completions`` capability: ``completion/complete`` for every prompt argument and template variable.

    ``server`` is ``hermes_mcp.app.HermesServer`` (which imports this module)."""
    from mcp_types import CompleteRequestParams

    completer = Completer(server, runtime)
    server.lowlevel.add_request_handler("completion/complete", CompleteRequestParams, completer.complete)
    return completer
