"""Resources, resource templates and prompts: sessions, skills and memory files; skills as prompts.

URIs:
- ``hermes://sessions`` — recent sessions (Markdown index); ``hermes://sessions/{session_id}``
  — one conversation as Markdown (long ones end with a pointer to ``session_read``);
- ``hermes://skills/{name}`` — a skill's SKILL.md; every skill is also a prompt of its name;
- ``hermes://memory/{file}`` — ``MEMORY.md`` and ``USER.md``.

They are live: a client subscribes to a memory file, a skill or a session and is told when it
changes, whichever process changed it; and when skills come, go or are re-described, clients
are told that the resource and prompt lists changed. In the handshake era with
``resources/subscribe`` and ``notifications/resources/updated`` / ``*/list_changed`` on each
connection, in the 2026-07-28 era through the SDK's subscription bus to ``subscriptions/listen``
streams. ``hermes_mcp.watch`` finds the changes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.learning import memory, skills
from hermes_mcp import watch
from hermes_mcp.history import transcript_markdown
from hermes_mcp.views import iso

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import MCPServer
    from mcp.server.subscriptions import SubscriptionBus

    from hermes_mcp.runtime import Runtime

__all__ = ["ChangeNotifier", "dynamic_resources", "register_resources", "skill_prompt", "skill_prompts", "watch_skills"]

log = logging.getLogger(__name__)

MARKDOWN = "text/markdown"
RECENT_SESSIONS = 20
MAX_LEGACY_CONNECTIONS = 64
# Listing these is asking to be told when they change (handshake era).
LIST_METHODS = frozenset({"resources/list", "prompts/list"})
DESCRIPTIONS = {"files": "memory files and skills", "sessions": "subscribed sessions in the store"}


def register_resources(server: MCPServer, runtime: Runtime) -> None:
    """The static resource and the templates (the dynamic list comes from ``dynamic_resources``)."""
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    @server.resource(
        "hermes://sessions",
        name="sessions",
        title="Recent sessions",
        mime_type=MARKDOWN,
        description="The most recent conversations from every surface",
    )
    async def sessions_index() -> str:
        store = await runtime.store()
        lines = ["# Recent sessions", ""]
        for record in await store.list_sessions(limit=50):
            lines.append(f"- `{record.id}` {record.title or 'untitled'} — {record.cwd} ({record.surface}, {iso(record.updated_at)})")
        if len(lines) == 2:
            lines.append("No sessions yet.")
        return "\n".join(lines) + "\n"

    @server.resource(
        "hermes://sessions/{session_id}",
        name="session",
        title="A conversation",
        mime_type=MARKDOWN,
        description="One conversation as Markdown",
    )
    async def session_text(session_id: str) -> str:
        text = await transcript_markdown(await runtime.store(), session_id)
        if text is None:
            raise ResourceNotFoundError(f"no session {session_id!r}")
        return text

    @server.resource("hermes://skills/{name}", name="skill", title="A skill", mime_type=MARKDOWN, description="A skill's SKILL.md")
    async def skill_text(name: str) -> str:
        text = await asyncio.to_thread(_skill_text, name, list(runtime.projects))
        if text is None:
            raise ResourceNotFoundError(f"no skill {name!r}")
        return text

    @server.resource(
        "hermes://memory/{file}",
        name="memory",
        title="A memory file",
        mime_type=MARKDOWN,
        description="MEMORY.md (notes) or USER.md (about the user)",
    )
    async def memory_text(file: str) -> str:
        names = {name: kind for kind, name in memory.FILES.items()}
        if file not in names:
            raise ResourceNotFoundError(f"no memory file {file!r}; there are {', '.join(names)}")
        return await asyncio.to_thread(_memory_text, names[file])


def _skill_text(name: str, projects: list) -> str | None:
    skill = skills.find(name, projects)
    if skill is None:
        return None
    try:
        return skills.read_text(skill)
    except OSError:
        return None


def _memory_text(kind: str) -> str:
    try:
        return memory.memory_path(kind).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


async def dynamic_resources(runtime: Runtime) -> list[Any]:
    """Concrete resources for what exists now: each skill, each memory file, recent sessions."""
    from mcp_types import Resource

    out = []
    for skill in await asyncio.to_thread(skills.discover, list(runtime.projects)):
        out.append(
            Resource(
                uri=f"hermes://skills/{skill.name}",
                name=f"skill-{skill.name}",
                title=f"Skill: {skill.name}",
                description=skill.description or None,
                mime_type=MARKDOWN,
            )
        )
    for kind, name in memory.FILES.items():
        out.append(
            Resource(uri=f"hermes://memory/{name}", name=f"memory-{kind}", title=f"Memory: {memory.LABELS[kind]}", mime_type=MARKDOWN)
        )
    store = await runtime.store()
    for record in await store.list_sessions(limit=RECENT_SESSIONS):
        out.append(
            Resource(
                uri=f"hermes://sessions/{record.id}",
                name=f"session-{record.id[:8]}",
                title=record.title or f"Session {record.id[:8]}",
                description=f"{record.cwd} ({record.surface}, {iso(record.updated_at)})",
                mime_type=MARKDOWN,
            )
        )
    return out


async def skill_prompts(runtime: Runtime) -> list[Any]:
    """Every skill as a prompt with one optional argument, the task to apply it to."""
    from mcp_types import Prompt, PromptArgument

    return [
        Prompt(
            name=skill.name,
            title=f"Skill: {skill.name}",
            description=skill.description or f"Use the {skill.name} skill",
            arguments=[PromptArgument(name="task", description="what to apply the skill to", required=False)],
        )
        for skill in await asyncio.to_thread(skills.discover, list(runtime.projects))
    ]


async def skill_prompt(runtime: Runtime, name: str, arguments: dict[str, str] | None) -> Any:
    """The prompt for one skill; an unknown name is a JSON-RPC invalid-params error."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS, GetPromptResult, PromptMessage, TextContent

    skill = await asyncio.to_thread(skills.find, name, list(runtime.projects))
    body = await asyncio.to_thread(_skill_text, name, list(runtime.projects)) if skill is not None else None
    if skill is None or body is None:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {name}")
    task = (arguments or {}).get("task", "").strip()
    intro = f"Use the skill '{skill.name}' below" + (f" for this: {task}" if task else "") + "."
    text = f'{intro}\n\n<skill name="{skill.name}" path="{skill.path}">\n{body}\n</skill>'
    return GetPromptResult(
        description=skill.description or None,
        messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
    )


@dataclass
class _Peer:
    """A handshake-era connection: how to reach it, whether it listed, what it subscribed to."""

    session: Any
    listed: bool = False
    uris: set[str] = field(default_factory=set)


@dataclass
class _Listen:
    """A 2026-07-28 ``subscriptions/listen`` stream: what it asked for."""

    uris: frozenset[str]
    lists: bool


@dataclass
class _Job:
    """A watcher started on demand: stopped through ``stop`` and ``scope``; ``ready`` once it watches."""

    name: str
    ready: Any  # anyio.Event
    stop: Any  # anyio.Event
    scope: Any  # anyio.CancelScope
    released: bool = False  # stopped because nothing needs it any more


class ChangeNotifier:
    """Live resources: who wants to hear of which change, the watchers that find changes, and the notices.

    Handshake-era clients subscribe with ``resources/subscribe`` and are told through
    ``notifications/resources/updated``; list changes go to each connection that listed resources
    or prompts. 2026-07-28 clients ask on a ``subscriptions/listen`` stream, and every notice is
    published on the SDK's subscription bus, which filters by what each stream asked for.

    The file watcher runs while some connection has listed, a stream listens for list changes,
    or a memory file or skill is subscribed; the store poll while a session is subscribed. Both
    are started before the request that needs them is answered, stopped when the last
    subscription or connection that needed them goes, and at shutdown.
    """

    def __init__(self, bus: SubscriptionBus) -> None:
        self.bus = bus
        self._runtime: Runtime | None = None
        self._peers: OrderedDict[Any, _Peer] = OrderedDict()
        self._listens: dict[object, _Listen] = {}
        self._group: Any = None  # the task group of serve(), while it runs
        self._lock: Any = None  # anyio.Lock around comparisons (made in the event loop)
        self._files: _Job | None = None
        self._store: _Job | None = None
        self._probe: watch.StoreProbe | None = None
        self._known: dict[str, Hashable] = {}  # the last stamp seen of each subscribed URI
        self._listing: Hashable | None = None  # the skills as last listed, while files are watched

    def attach(self, server: Any, runtime: Runtime) -> None:
        """Serve ``resources/subscribe`` and ``resources/unsubscribe`` (handshake era) for ``server``."""
        from mcp_types import SubscribeRequestParams, UnsubscribeRequestParams

        self._runtime = runtime
        server.lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
        server.lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe)

    # --- who wants what -------------------------------------------------------------------

    async def middleware(self, ctx: ServerRequestContext, call_next: Any) -> Any:
        """Server middleware: remember handshake-era connections, and what listen streams ask for."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if ctx.method == "subscriptions/listen":
            return await self._listen(ctx, call_next)
        if ctx.request_id is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            peer = self._peer(ctx)
            if ctx.method in LIST_METHODS and not peer.listed:
                peer.listed = True
                await self._demand(())  # watching before the list is answered: no change falls in between
        return await call_next(ctx)

    async def _listen(self, ctx: ServerRequestContext, call_next: Any) -> Any:
        wanted = (ctx.params or {}).get("notifications")
        wanted = wanted if isinstance(wanted, dict) else {}
        uris = wanted.get("resourceSubscriptions")
        listen = _Listen(
            uris=frozenset(u for u in uris if isinstance(u, str)) if isinstance(uris, list) else frozenset(),
            lists=wanted.get("resourcesListChanged") is True or wanted.get("promptsListChanged") is True,
        )
        token = object()
        self._listens[token] = listen
        try:
            await self._demand(listen.uris)  # before the stream is acknowledged
            return await call_next(ctx)
        finally:
            del self._listens[token]
            self._release()

    def _peer(self, ctx: ServerRequestContext) -> _Peer:
        # The SDK hands requests no public handle on their connection, and the connection's exit
        # stack is the one place that learns it ended; without it, the transport's session id.
        connection = getattr(ctx.session, "_connection", None)
        if connection is not None:
            key: Any = connection
        else:
            headers = getattr(ctx.request, "headers", None)
            key = (headers.get("mcp-session-id") if headers is not None else None) or "stdio"
        peer = self._peers.get(key)
        if peer is not None:
            peer.session = ctx.session
            self._peers.move_to_end(key)
            return peer
        peer = self._peers[key] = _Peer(ctx.session)
        if connection is not None:
            # Unwound by the SDK when the connection closes (stdio EOF, HTTP DELETE or idle timeout).
            connection.exit_stack.callback(self._forget, key)
        while len(self._peers) > MAX_LEGACY_CONNECTIONS:
            self._peers.popitem(last=False)
            self._release()
        return peer

    def _forget(self, key: Any) -> None:
        if self._peers.pop(key, None) is not None:
            self._release()

    async def _subscribe(self, ctx: ServerRequestContext, params: Any) -> Any:
        from mcp_types import EmptyResult

        # Any URI is accepted, as the SDK's listen streams accept any: one that names nothing
        # here (yet) is simply never updated, or is once it comes to exist.
        uri = str(params.uri)
        self._peer(ctx).uris.add(uri)
        await self._demand({uri})
        return EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext, params: Any) -> Any:
        from mcp_types import EmptyResult

        self._peer(ctx).uris.discard(str(params.uri))
        self._release()
        return EmptyResult()

    def _subscribed(self) -> set[str]:
        return {u for p in self._peers.values() for u in p.uris} | {u for s in self._listens.values() for u in s.uris}

    def _wants_files(self, subscribed: set[str]) -> bool:
        return (
            any(p.listed for p in self._peers.values())
            or any(s.lists for s in self._listens.values())
            or any(watch.is_file_uri(u) for u in subscribed)
        )

    # --- the watchers ---------------------------------------------------------------------

    async def serve(self) -> None:
        """Run until cancelled (the server's lifetime): the watchers are started in here, on demand."""
        import anyio

        self._lock = anyio.Lock()
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                await anyio.sleep_forever()
        finally:
            self._group = self._files = self._store = None
            self._known.clear()
            self._listing = None

    async def _demand(self, new: Iterable[str]) -> None:
        """Start the watchers now needed, wait until they watch, and note how ``new`` URIs look now."""
        import anyio

        if self._group is None or self._runtime is None:
            return  # not serving (the server object used on its own)
        runtime = self._runtime
        subscribed = self._subscribed()
        if self._files is None and self._wants_files(subscribed):
            self._files = self._start("files", functools.partial(self._watch_files, runtime))
        if self._store is None and any(watch.is_store_uri(u) for u in subscribed):
            self._store = self._start("sessions", self._poll_store)
        for job in (self._files, self._store):
            if job is not None:
                await job.ready.wait()
        fresh = [u for u in new if u not in self._known]
        async with self._lock:
            if self._files is not None and self._listing is None:
                self._listing = await anyio.to_thread.run_sync(watch.skills_listing, list(runtime.projects))
            stamps = await self._stamps(fresh) if fresh else {}
            for uri in fresh:
                self._known.setdefault(uri, stamps.get(uri))

    def _release(self) -> None:
        """Stop the watchers nothing needs any more (synchronous: callable while being cancelled)."""
        subscribed = self._subscribed()
        for uri in [u for u in self._known if u not in subscribed]:
            del self._known[uri]
        if self._files is not None and not self._wants_files(subscribed):
            self._stop(self._files)
            self._files = None
            self._listing = None
        if self._store is not None and not any(watch.is_store_uri(u) for u in subscribed):
            self._stop(self._store)
            self._store = None

    def _start(self, name: str, run: Callable[[Any, Any], Awaitable[None]]) -> _Job:
        import anyio

        job = _Job(name, anyio.Event(), anyio.Event(), anyio.CancelScope())
        self._group.start_soon(self._run_job, job, run, name=f"hermes-mcp watch {name}")
        log.info("live resources: watching %s for changes", DESCRIPTIONS[name])
        return job

    def _stop(self, job: _Job) -> None:
        job.released = True
        job.stop.set()
        job.scope.cancel()
        log.info("live resources: stopped watching %s (no client needs it now)", DESCRIPTIONS[job.name])

    async def _run_job(self, job: _Job, run: Callable[[Any, Any], Awaitable[None]]) -> None:
        import anyio

        try:
            with job.scope:
                async with anyio.create_task_group() as inner:

                    async def body() -> None:
                        try:
                            await run(job.ready, job.stop)
                        finally:
                            inner.cancel_scope.cancel()

                    inner.start_soon(body)
                    try:
                        await anyio.sleep_forever()
                    finally:
                        # Cancelled (shutdown, or nothing needs it): the file watcher waits in a
                        # thread, which sees this within a fraction of a second and returns.
                        job.stop.set()
        except Exception:
            job.released = True
            log.exception("live resources: watching %s failed; clients are not told of its changes", DESCRIPTIONS[job.name])
        finally:
            if not job.released:
                log.info("live resources: stopped watching %s (the server is ending)", DESCRIPTIONS[job.name])
            job.ready.set()  # nobody waits for a watcher that has ended
            if self._files is job:
                self._files = None
            if self._store is job:
                self._store = None

    async def _watch_files(self, runtime: Runtime, ready: Any, stop: Any) -> None:
        await watch.watch_files(lambda: list(runtime.projects), self._files_changed, ready=ready, stop=stop)

    async def _poll_store(self, ready: Any, stop: Any) -> None:
        assert self._runtime is not None
        store = await self._runtime.store()
        probe = watch.StoreProbe(store.path)
        self._probe = probe
        try:
            await watch.poll_store(probe, self._store_changed, ready=ready, interval=watch.STORE_POLL_SECONDS)
        finally:
            if self._probe is probe:
                self._probe = None

    async def _stamps(self, uris: Iterable[str]) -> dict[str, Hashable]:
        import anyio

        wanted = list(uris)
        out: dict[str, Hashable] = {}
        files = [u for u in wanted if watch.is_file_uri(u)]
        if files and self._runtime is not None:
            out.update(await anyio.to_thread.run_sync(watch.file_stamps, files, list(self._runtime.projects)))
        rows = [u for u in wanted if watch.is_store_uri(u)]
        if rows and self._probe is not None:
            out.update(await anyio.to_thread.run_sync(self._probe.stamps, rows))
        return out

    async def _compare(self, uris: Iterable[str]) -> list[str]:
        """The subscribed URIs among ``uris`` that look different from when last seen (in URI order)."""
        subscribed = self._subscribed()
        wanted = sorted(u for u in uris if u in subscribed)
        if not wanted:
            return []
        stamps = await self._stamps(wanted)
        changed = []
        for uri in wanted:
            if uri not in stamps:
                continue
            if uri in self._known and self._known[uri] != stamps[uri]:
                changed.append(uri)
            if uri in self._subscribed():  # not unsubscribed meanwhile
                self._known[uri] = stamps[uri]
        return changed

    async def _files_changed(self, uris: set[str] | None, skill_touched: bool) -> None:
        import anyio

        assert self._runtime is not None
        async with self._lock:
            # The listing is read before the files: a save that lands in between is then seen
            # by the files (an update now) and by the next event's listing (a list change
            # after it), never as a list change before the update it belongs to.
            lists_changed = False
            if skill_touched:
                listing = await anyio.to_thread.run_sync(watch.skills_listing, list(self._runtime.projects))
                lists_changed = self._listing is not None and listing != self._listing
                self._listing = listing
            subscribed = self._subscribed()
            changed = await self._compare(subscribed if uris is None else uris)
        for uri in changed:
            await self.updated(uri)
        if lists_changed:
            log.info("skills changed on disk; notifying clients")
            await self.changed()

    async def _store_changed(self) -> None:
        async with self._lock:
            changed = await self._compare(u for u in self._subscribed() if watch.is_store_uri(u))
        for uri in changed:
            await self.updated(uri)

    # --- the notices ----------------------------------------------------------------------

    async def changed(self) -> None:
        """Tell clients that the resource and prompt lists changed."""
        from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged

        await self.bus.publish(ResourcesListChanged())
        await self.bus.publish(PromptsListChanged())
        for peer in [p for p in self._peers.values() if p.listed]:
            try:
                await peer.session.send_resource_list_changed()
                await peer.session.send_prompt_list_changed()
            except Exception:  # a closed connection: best effort, as the notifications are
                log.debug("could not notify a connection", exc_info=True)

    async def updated(self, uri: str) -> None:
        """Tell the clients subscribed to ``uri`` that it changed."""
        from mcp.server.subscriptions import ResourceUpdated

        log.debug("resource changed: %s", uri)
        await self.bus.publish(ResourceUpdated(uri=uri))
        for peer in [p for p in self._peers.values() if uri in p.uris]:
            try:
                await peer.session.send_resource_updated(uri)
            except Exception:
                log.debug("could not notify a connection", exc_info=True)


async def watch_skills(runtime: Runtime, notifier: ChangeNotifier) -> None:
    """Run for the server's lifetime (each transport starts it): hosts the watchers live resources need.

    Memory files and skills are watched with watchfiles and sessions followed through the store,
    each only while a client needs it (see ``ChangeNotifier``); all stop when this is cancelled.
    """
    await notifier.serve()
