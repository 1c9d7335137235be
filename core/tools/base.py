"""Tools: typed async functions with metadata, and the one path that dispatches them all."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shutil
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from core.events import DiffContent, Event, Location, Notice, PermissionNeeded, ToolContent, ToolKind, ToolUpdated
from core.host.checkpoints import Checkpoints
from core.host.local import BinaryFileError, Host, TextFile, encode_text
from core.host.sandbox import Confinement, Grants, new_protected_paths, protected_entries
from core.messages import FileDiff, ToolCallPart, ToolResultMessage
from core.models.base import ToolSpec
from core.paths import within
from core.policy.approvals import Action, ApprovalBroker, ApprovalPolicy, ApprovalRequest, Decision, Ruling
from core.redaction import scrub

__all__ = [
    "FileChange",
    "FileLedger",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolRejected",
    "changed_region",
    "display_diff",
    "ledger_for",
    "run_tool",
    "tool",
]

log = logging.getLogger(__name__)


class ToolError(Exception):
    """A failure the model should read and can act on."""


class ToolRejected(ToolError):
    """The user (or the policy) said no."""


@dataclass(slots=True)
class ToolOutput:
    """What a tool returns: text for the model, content and diffs for the user."""

    text: str
    content: list[ToolContent] = field(default_factory=list)
    diffs: list[FileDiff] = field(default_factory=list)


ToolFunc = Callable[["ToolContext", Any], Awaitable["ToolOutput | str"]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    func: ToolFunc
    kind: ToolKind
    read_only: bool
    toolsets: frozenset[str]
    # A short human title from the arguments, e.g. "Read src/app.py".
    title: Callable[[Any], str]
    # Paths the call touches, relative ones resolved against the session cwd.
    paths: Callable[[Any], list[str]]

    def spec(self) -> ToolSpec:
        schema = self.args_model.model_json_schema()
        defs = schema.pop("$defs", {})
        return ToolSpec(self.name, self.description, _compact(schema, defs))


def _compact(node: Any, defs: dict) -> Any:
    """A schema without titles, without defaults that go without saying ("", false, 0, [], null), and
    with nested models inlined: smaller, and every provider takes it."""
    if isinstance(node, list):
        return [_compact(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _compact(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    return {k: _compact(v, defs) for k, v in node.items() if not (k == "title" and isinstance(v, str)) and not (k == "default" and not v)}


def tool(
    *,
    kind: ToolKind,
    read_only: bool,
    toolsets: Iterable[str],
    title: Callable[[Any], str] | None = None,
    paths: Callable[[Any], list[str]] | None = None,
) -> Callable[[ToolFunc], Tool]:
    """Make a Tool of ``async def name(ctx, args: ArgsModel)``; its docstring is the description."""

    def wrap(func: ToolFunc) -> Tool:
        args_model = func.__annotations__.get("args")
        if isinstance(args_model, str):
            args_model = func.__globals__[args_model]
        return Tool(
            name=func.__name__,
            description=(func.__doc__ or "").strip(),
            args_model=args_model,
            func=func,
            kind=kind,
            read_only=read_only,
            toolsets=frozenset(toolsets),
            title=title or (lambda _args, _n=func.__name__: _n),
            paths=paths or (lambda _args: []),
        )

    return wrap


@dataclass(slots=True)
class FileChange:
    """One file a tool is about to change: ``after`` None deletes it, ``move_to`` renames it."""

    path: Path
    before: TextFile | None  # None: the file does not exist yet
    after: str | None
    encoding: str = "utf-8"
    move_to: Path | None = None


class FileLedger:
    """What the agent last saw of each file, so that a write never lands on content it has not seen."""

    def __init__(self) -> None:
        self._seen: dict[Path, str] = {}

    def saw(self, path: Path, text: str) -> None:
        self._seen[path] = _digest(text)

    def forget(self, path: Path) -> None:
        self._seen.pop(path, None)

    def stale(self, path: Path, text: str) -> bool:
        """True when the agent read ``path`` and it holds something else now."""
        seen = self._seen.get(path)
        return seen is not None and seen != _digest(text)


_LEDGERS: OrderedDict[str, FileLedger] = OrderedDict()


def ledger_for(session_id: str) -> FileLedger:
    """The session's ledger (kept for the most recent sessions of this process)."""
    ledger = _LEDGERS.pop(session_id, None) or FileLedger()
    _LEDGERS[session_id] = ledger
    while len(_LEDGERS) > 256:
        _LEDGERS.popitem(last=False)
    return ledger


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


DIFF_FULL_LIMIT = 256_000
_CHUNK = 65536


def changed_region(old: str, new: str, context: int = 3) -> tuple[int, int, int, int]:
    """Where two texts differ, in whole lines plus ``context`` lines around:
    (start, old_end, new_end) as offsets, and the 1-based line number of ``start``.

    Found by comparing slices (memcmp speed), so a one-line change in a 10 MB file costs
    milliseconds, not a line-by-line walk.
    """
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix : prefix + _CHUNK] == new[prefix : prefix + _CHUNK]:
        prefix += _CHUNK
    prefix = min(prefix, limit)
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix, room = 0, limit - prefix
    while (
        suffix + _CHUNK <= room
        and old[len(old) - suffix - _CHUNK : len(old) - suffix] == new[len(new) - suffix - _CHUNK : len(new) - suffix]
    ):
        suffix += _CHUNK
    while suffix < room and old[len(old) - suffix - 1] == new[len(new) - suffix - 1]:
        suffix += 1
    start = old.rfind("\n", 0, prefix) + 1
    for _ in range(context):
        if start == 0:
            break
        start = old.rfind("\n", 0, start - 1) + 1
    ends = []
    for text in (old, new):
        end = len(text) - suffix
        if end > start and text[end - 1] == "\n" and suffix:
            end -= 1  # the change ends with a whole line: its newline is part of it
        for _ in range(context + 1):
            found = text.find("\n", end)
            end = len(text) if found == -1 else found + 1
            if end == len(text):
                break
        ends.append(end)
    return start, ends[0], ends[1], old.count("\n", 0, start) + 1


def display_diff(path: Path, old: str | None, new: str) -> FileDiff:
    """The diff the user sees. Past DIFF_FULL_LIMIT only the changed lines (and some context)
    travel, so that a one-line edit of a huge file does not send it twice."""
    if old is None or len(old) + len(new) <= DIFF_FULL_LIMIT:
        return FileDiff(path=str(path), old_text=old, new_text=new)
    start, old_end, new_end, _ = changed_region(old, new)
    return FileDiff(path=str(path), old_text=old[start:old_end], new_text=new[start:new_end])


@dataclass(slots=True)
class ToolContext:
    """What a running tool may use: the session's host, roots, approvals and the event sink."""

    session_id: str
    cwd: Path
    roots: list[Path]
    host: Host
    policy: ApprovalPolicy
    broker: ApprovalBroker
    emit: Callable[[Event], Awaitable[None]]
    call_id: str = ""
    tool: Tool | None = None
    remember_rule: Callable[[str, str, str], Awaitable[None]] | None = None
    # The turn this call belongs to: a turn's first write of a file checkpoints it. Without
    # one, each call is its own checkpoint.
    turn_id: str | None = None
    checkpoints: Checkpoints | None = None  # None: the state home's
    files: FileLedger | None = None  # None: the session's (see ledger_for)
    # Ask a (cheaper) model for a short text, e.g. session_search's summaries; None when the
    # surface or the ``[learning] search_summary`` setting does not allow it.
    summarize: Callable[[str], Awaitable[str]] | None = None
    _approved: set[Path] = field(default_factory=set)
    _command_approved: str | None = None
    _confinement: Confinement | None = None
    _running: bool = False

    def __post_init__(self) -> None:
        if self.files is None:
            self.files = ledger_for(self.session_id)

    def resolve(self, path: str) -> Path:
        """An absolute, resolved path (symlinks and '..' followed) for a path the model gave."""
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.cwd / candidate
        return candidate.resolve()

    async def show(self, content: list[ToolContent]) -> None:
        """Show content in this tool call while it runs."""
        await self.emit(ToolUpdated(self.call_id, content=content))

    async def check_read(self, path: Path) -> None:
        """Ask before reading outside the project or a secret; allow the rest."""
        await self._gate(Action(self._name, self._kind, True, (path,)), title=f"Read {path}")

    async def read_file(self, path: Path) -> TextFile:
        """Read a text file through the host, remembering what the agent saw of it."""
        found = await self.host.read_file(path)
        assert self.files is not None
        self.files.saw(path, found.text)
        return found

    async def current(self, path: Path) -> TextFile | None:
        """A file's content now (None when it does not exist), without counting as a read.

        A binary file comes back as a stand-in text (size and hash), enough to move or delete it.
        """
        try:
            return await self.host.read_file(path)
        except FileNotFoundError:
            return None
        except BinaryFileError:
            data = await asyncio.to_thread(path.read_bytes)
            return TextFile(f"<binary file: {len(data)} bytes, sha1 {hashlib.sha1(data).hexdigest()}>", "binary")

    async def approve_change(self, title: str, diffs: list[FileDiff], paths: list[Path] | None = None) -> None:
        """Ask before changing files (``diffs`` are shown); raises ToolRejected on no."""
        touched = tuple(paths) if paths is not None else tuple(Path(d.path) for d in diffs)
        await self._gate(Action(self._name, self._kind, False, touched), title=title, diffs=diffs)
        self._approved.update(touched)

    async def approve_command(self, command: str, cwd: Path, wants: Grants = Grants()) -> None:
        """Ask before running ``command`` (and for what it ``wants`` beyond the sandbox); raises
        ToolRejected on no. The command then runs with what its ruling grants."""
        action = Action(self._name, "execute", False, (cwd,), command, wants)
        ruling = await self._gate(action, title=f"Run `{command}`", command=command)
        self._command_approved = command
        self._confinement = Confinement(tuple(self.roots), ruling.grants)

    async def approve_call(self, title: str, *, detail: str = "") -> None:
        """Ask before a tool that is neither an edit nor a command acts (an MCP tool, say)."""
        await self._gate(Action(self._name, self._kind, False, ()), title=title, detail=detail)

    async def apply_changes(self, title: str, changes: list[FileChange]) -> list[FileDiff]:
        """The one way tools change files; all of ``changes`` land or none do.

        Refused when a file changed since the agent read it; shown as diffs and approved;
        re-checked after approval (the user may have typed meanwhile); checkpointed; then
        written atomically, the already written ones put back if a later one fails.
        """
        assert self.files is not None
        for change in changes:
            if change.before is not None and self.files.stale(change.path, change.before.text):
                raise ToolError(
                    f"{change.path} changed since you last read it (the user or another program edited it). "
                    "Read it again, then redo the change on what it holds now."
                )
            if change.after is not None:
                _check_encodable(change.move_to or change.path, change.after, change.encoding)
        diffs = [
            display_diff(
                change.move_to or change.path,
                change.before.text if change.before else None,
                change.after if change.after is not None else "",
            )
            for change in changes
            if change.move_to is None or (change.after is not None and change.before is not None and change.after != change.before.text)
        ]
        touched = [p for change in changes for p in (change.path, change.move_to) if p is not None]
        await self.approve_change(title, diffs, touched)
        for change in changes:
            now = await self.current(change.path)
            if (now.text if now else None) != (change.before.text if change.before else None):
                raise ToolError(
                    f"{change.path} changed while waiting for approval; nothing was written. Read it again and redo the change."
                )
            if change.move_to is not None and change.move_to.exists():
                raise ToolError(f"{change.move_to} already exists; nothing was changed.")
        await self._checkpoint(touched)
        done: list[FileChange] = []
        try:
            for change in changes:
                await self._apply(change)
                done.append(change)
        except OSError as exc:
            await self._roll_back(done)
            raise ToolError(f"Changing {change.path} failed ({exc}); files changed before it were put back.") from exc
        for change in changes:
            if change.after is None and change.move_to is None:
                self.files.forget(change.path)
            elif change.move_to is not None:
                self.files.forget(change.path)
                self.files.saw(change.move_to, change.after if change.after is not None else change.before.text)
            else:
                self.files.saw(change.path, change.after)
        await self._checkpoint(touched, written=True)
        return diffs

    async def _apply(self, change: FileChange) -> None:
        if change.path not in self._approved:
            raise ToolError(f"internal error: {change.path} was changed without approval")
        if change.move_to is not None:
            await self.host.move(change.path, change.move_to)
            if change.after is not None and change.before is not None and change.after != change.before.text:
                await self.host.write_text(change.move_to, change.after, encoding=change.encoding)
        elif change.after is None:
            await self.host.delete(change.path)
        else:
            await self.host.write_text(change.path, change.after, encoding=change.encoding)

    async def _roll_back(self, done: list[FileChange]) -> None:
        for change in reversed(done):
            try:
                if change.move_to is not None:
                    await self.host.move(change.move_to, change.path)
                    if change.after is None or change.before is None or change.after == change.before.text:
                        continue
                if change.before is None:
                    await self.host.delete(change.path)
                else:
                    await self.host.write_text(change.path, change.before.text, encoding=change.before.encoding)
            except Exception:
                log.exception("could not put back %s", change.path)

    async def _checkpoint(self, paths: list[Path], *, written: bool = False) -> None:
        store = self.checkpoints or Checkpoints()
        turn = self.turn_id or self.call_id or "call"
        try:
            if written:
                await store.record_written(self.session_id, turn, paths)
            else:
                await store.snapshot(self.session_id, turn, paths)
        except ImportError:
            log.warning("GitPython is unavailable: changes are not checkpointed")
        except Exception as exc:
            if written:
                log.warning("could not record the written state of %s: %s", paths, exc)
                return
            raise ToolError(f"Could not save a checkpoint before changing files ({exc}); nothing was changed.") from exc

    async def write_text(self, path: Path, content: str, *, encoding: str = "utf-8") -> None:
        """Write through the host; only paths approved in this call may be written."""
        if path not in self._approved:
            raise ToolError(f"internal error: {path} was written without approval")
        await self.host.write_text(path, content, encoding=encoding)

    async def run_command(self, command: str, cwd: Path, *, timeout: float, output_limit: int):
        """Run an approved command through the host (the editor's terminal when it has one),
        inside the sandbox with what its approval granted. Returns the result and a note on
        protected paths it created, which are removed ("" when none)."""
        if self._command_approved != command:
            raise ToolError("internal error: command run without approval")
        before = await self._protected_before()
        result = await self.host.run_command(
            command, cwd, timeout=timeout, output_limit=output_limit, show=self.show, confinement=self._confinement
        )
        note = await asyncio.to_thread(_remove_new_protected, self.roots, before, self._confinement) if before is not None else ""
        return result, note

    async def start_command(self, command: str, cwd: Path, *, output_limit: int):
        """Start an approved command in the background; it keeps running after the call."""
        if self._command_approved != command:
            raise ToolError("internal error: command started without approval")
        before = await self._protected_before()
        job = await self.host.start_command(command, cwd, output_limit=output_limit, show=self.show, confinement=self._confinement)
        _BACKGROUND_AUDITS[id(job)] = (list(self.roots), before, self._confinement)
        return job

    async def _protected_before(self) -> list[Path] | None:
        """The protected paths there are before a sandboxed command runs; None when it is not
        checked afterwards (no sandbox, or the user let it out)."""
        confinement = self._confinement
        if confinement is None or confinement.grants.unconfined or not self.policy.sandboxed:
            return None
        return await asyncio.to_thread(protected_entries, self.roots)

    async def after_background(self, job: object) -> str:
        """Once a background command has ended: remove protected paths it created, as for
        ``run_command``; a note on what was removed ("" for nothing)."""
        roots, before, confinement = _BACKGROUND_AUDITS.pop(id(job), (None, None, None))
        if roots is None or before is None:
            return ""
        return await asyncio.to_thread(_remove_new_protected, roots, before, confinement)

    @property
    def _name(self) -> str:
        return self.tool.name if self.tool else "?"

    @property
    def _kind(self) -> str:
        return self.tool.kind if self.tool else "other"

    async def _gate(
        self,
        action: Action,
        *,
        title: str,
        diffs: list[FileDiff] | None = None,
        command: str | None = None,
        detail: str = "",
    ) -> Ruling:
        ruling = self.policy.ruling(action)
        if ruling.notice and ruling.notice not in self.policy.said:
            self.policy.said.add(ruling.notice)
            await self.emit(Notice(ruling.notice, "warning"))
        if ruling.verdict == "allow":
            await self._mark_running()
            return ruling
        if ruling.verdict == "refuse":
            raise ToolRejected(f"Not allowed: {ruling.reason}.")
        request = await self.broker.open(
            ApprovalRequest(
                session_id=self.session_id,
                tool_call_id=self.call_id,
                tool_name=action.tool,
                tool_kind=action.kind,
                title=title,
                reason=detail or ruling.reason,
                diffs=list(diffs or []),
                command=command,
                paths=[str(p) for p in action.paths],
                offer_always=ruling.offer_always,
            )
        )
        await self.emit(PermissionNeeded(request))
        decision = await self.broker.wait(request)
        # "Always" is remembered only where it was on offer (never for dangerous commands or secrets).
        if decision in (Decision.ALLOW_ALWAYS, Decision.REJECT_ALWAYS) and ruling.offer_always:
            rule_tool, pattern = self.policy.rule_key(action)
            verdict_word = "allow" if decision.allowed else "deny"
            self.policy.rules.insert(0, (rule_tool, pattern, verdict_word))
            if self.remember_rule is not None:
                await self.remember_rule(rule_tool, pattern, verdict_word)
        if decision is Decision.CANCELLED:
            raise ToolRejected("The approval request was cancelled or timed out; nothing was changed.")
        if not decision.allowed:
            raise ToolRejected(
                "The user declined: they rejected this action, so nothing was done. Do not retry it as is: "
                "ask the user what they would like instead, or try a different approach."
            )
        await self._mark_running()
        return ruling

    async def _mark_running(self) -> None:
        """Pending (awaiting approval) becomes in progress once the call may go ahead."""
        if not self._running:
            self._running = True
            await self.emit(ToolUpdated(self.call_id))


# Background commands started in the sandbox, by id: what to check once they end.
_BACKGROUND_AUDITS: dict[int, tuple[list[Path], list[Path] | None, Confinement | None]] = {}


def _remove_new_protected(roots: list[Path], before: list[Path], confinement: Confinement | None) -> str:
    """Protected paths a sandboxed command created (it could not write existing ones) are
    removed: they would make git, the editor or CI run code that nobody approved."""
    granted = confinement.grants.writable if confinement else ()
    created = [p for p in new_protected_paths(roots, before) if not within(p, granted)]
    for path in created:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:
            log.warning("could not remove %s, created by a sandboxed command", path)
    if not created:
        return ""
    names = ", ".join(str(p) for p in created)
    return (
        f"\n[{names} was created by this command and removed: such paths make git, the editor or CI run code. "
        "To create it, run the command again with write_paths naming it; the user will be asked.]"
    )


def _check_encodable(path: Path, text: str, encoding: str) -> None:
    try:
        encode_text(text, encoding)
    except UnicodeEncodeError as exc:
        char = exc.object[exc.start]
        raise ToolError(
            f"{path} is encoded in {encoding}, which cannot hold {char!r} (U+{ord(char):04X}); use only characters that {encoding} has."
        ) from None


def _format_validation(tool_name: str, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        problems.append(f"{loc}: {err['msg']}")
    return f"Invalid arguments for {tool_name}: " + "; ".join(problems)


@dataclass(slots=True)
class ToolRun:
    """The outcome of one dispatched call."""

    result: ToolResultMessage
    content: list[ToolContent]
    failed: bool


async def run_tool(tools: dict[str, Tool], call: ToolCallPart, ctx: ToolContext) -> ToolRun:
    """The one dispatch path: validate, run, turn every failure into a result the model reads."""
    found = tools.get(call.name)

    def fail(message: str) -> ToolRun:
        return ToolRun(
            ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=scrub(message), is_error=True),
            [],
            True,
        )

    if found is None:
        return fail(f"Unknown tool '{call.name}'. Available tools: {', '.join(sorted(tools))}.")
    if call.invalid_arguments is not None:
        return fail(
            f"The arguments for {call.name} were not a valid JSON object: {call.invalid_arguments[:200]!r}. "
            "Call the tool again with valid JSON arguments."
        )
    try:
        args = found.args_model.model_validate(call.arguments)
    except ValidationError as exc:
        return fail(_format_validation(call.name, exc))
    ctx.tool = found
    ctx.call_id = call.id
    try:
        output = await found.func(ctx, args)
    except ToolError as exc:
        return fail(str(exc))
    except asyncio.CancelledError:
        raise
    except (OSError, UnicodeError) as exc:
        return fail(f"{call.name} failed: {exc}")
    except Exception as exc:  # a bug in a tool must not end the turn
        log.exception("tool %s crashed", call.name)
        return fail(f"{call.name} failed unexpectedly: {type(exc).__name__}: {exc}")
    if isinstance(output, str):
        output = ToolOutput(output)
    content = list(output.content) or [DiffContent(d.path, d.old_text, d.new_text) for d in output.diffs]
    return ToolRun(
        ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=scrub(output.text), diffs=list(output.diffs)),
        content,
        False,
    )


def tool_locations(found: Tool | None, args: dict, ctx: ToolContext) -> list[Location]:
    """Absolute locations a call will touch, for the editor to follow."""
    if found is None:
        return []
    try:
        parsed = found.args_model.model_validate(args)
        return [Location(str(ctx.resolve(p))) for p in found.paths(parsed)]
    except Exception:
        return []


def tool_title(found: Tool | None, name: str, args: dict) -> str:
    if found is None:
        return name
    try:
        return found.title(found.args_model.model_validate(args))
    except Exception:
        return name
