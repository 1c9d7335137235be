"""``ToolContext``: a tool's only door to the world — files, commands, approvals, checkpoints,
the session store and the settings tools read."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.config import Config, CronConfig, WebConfig
from core.events import ApprovalRequest, Decision, Event, Notice, PermissionNeeded, ToolContent, ToolUpdated
from core.host.checkpoints import Checkpoints
from core.host.local import BackgroundCommand, Host
from core.host.processes import CommandResult
from core.host.sandbox import Confinement, Grants, new_protected_paths, protected_entries
from core.host.text_files import BinaryFileError, TextFile, encode_text
from core.learning_config import LearningSettings
from core.messages import FileDiff, ImagePart
from core.paths import within
from core.policy.approvals import Action, ApprovalBroker, ApprovalPolicy, Ruling
from core.store import RuleDecision, SessionStore
from core.tools.delegation import Delegate
from core.tools.diffs import FileChange, FileLedger, display_diff, ledger_for
from core.tools.errors import ToolError, ToolRejected

__all__ = ["ToolContext", "ToolSettings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """What tools read of the configuration, taken from it once when the agent is built."""

    learning: LearningSettings = field(default_factory=LearningSettings)
    # The gateway owner's identities (``telegram:123``, ``discord:456``; ``Config.owner_identities``):
    # the owner reads every session and controls every job.
    owners: frozenset[str] = frozenset()
    # The zone new schedules are read in (``[cron] timezone``); None: the system's.
    timezone: str | None = None
    # ``[cron]``: the default destinations and named webhooks the cron tool offers.
    cron: CronConfig = field(default_factory=CronConfig)
    # ``[web]``: web_fetch's domains and caps, web_search's backend.
    web: WebConfig = field(default_factory=WebConfig)

    @classmethod
    def of(cls, config: Config) -> ToolSettings:
        """The settings of ``config``."""
        return cls(
            learning=config.learning, owners=config.owner_identities(), timezone=config.cron.timezone, cron=config.cron, web=config.web
        )


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
    tool_name: str = "?"  # the running call's tool, set by dispatch
    tool_kind: str = "other"
    remember_rule: Callable[[str, str, RuleDecision], Awaitable[None]] | None = None
    # The turn this call belongs to: a turn's first write of a file checkpoints it. Without
    # one, each call is its own checkpoint.
    turn_id: str | None = None
    checkpoints: Checkpoints | None = None  # None: the state home's
    files: FileLedger | None = None  # None: the session's (see ledger_for)
    # Ask a (cheaper) model for a short text, e.g. session_search's summaries; None when the
    # surface or the ``[learning] search_summary`` setting does not allow it.
    summarize: Callable[[str], Awaitable[str]] | None = None
    # Ask the model that sees images (the session's, or ``[models] vision``) a question about
    # them; raises ToolError when none can. None where the surface gives tools no model.
    look: Callable[[list[ImagePart], str], Awaitable[str]] | None = None
    # Run subagents for this call (the delegate tool); None where the agent offers none.
    delegate: Delegate | None = None
    # The session's open store (None where a surface gives tools none) and the settings tools read.
    store: SessionStore | None = None
    settings: ToolSettings = field(default_factory=ToolSettings)
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
        await self._gate(Action(self.tool_name, self.tool_kind, True, (path,)), title=f"Read {path}")

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
            remote = getattr(self.host, "remote_files", None)  # another machine's files
            data = await remote.read_bytes(path) if remote is not None else await asyncio.to_thread(path.read_bytes)
            return TextFile(f"<binary file: {len(data)} bytes, sha1 {hashlib.sha1(data).hexdigest()}>", "binary")

    async def approve_change(self, title: str, diffs: list[FileDiff], paths: list[Path] | None = None) -> None:
        """Ask before changing files (``diffs`` are shown); raises ToolRejected on no."""
        touched = tuple(paths) if paths is not None else tuple(Path(d.path) for d in diffs)
        await self._gate(Action(self.tool_name, self.tool_kind, False, touched), title=title, diffs=diffs)
        self._approved.update(touched)

    async def approve_command(self, command: str, cwd: Path, wants: Grants = Grants()) -> None:
        """Ask before running ``command`` (and for what it ``wants`` beyond the sandbox); raises
        ToolRejected on no. The command then runs with what its ruling grants."""
        action = Action(self.tool_name, "execute", False, (cwd,), command, wants)
        ruling = await self._gate(action, title=f"Run `{command}`", command=command)
        self._command_approved = command
        self._confinement = Confinement(tuple(self.roots), ruling.grants)

    async def approve_call(self, title: str, *, detail: str = "", every_time: str = "") -> None:
        """Ask before a tool that is neither an edit nor a command acts (an MCP tool, say).

        ``every_time``: why this call asks in every mode, never offering "always" (it reaches
        outside the project); the policy's refusals (read-only mode) still stand."""
        action = Action(self.tool_name, self.tool_kind, False, ())
        ruling = None
        if every_time:
            base = self.policy.ruling(action)
            ruling = base if base.verdict == "refuse" else Ruling("ask", every_time, False)
        await self._gate(action, title=title, detail=detail, ruling=ruling)

    async def approve_network(self, title: str, host: str, *, every_time: str = "") -> None:
        """Ask before a request leaves this machine for ``host`` (the policy's network ruling:
        asks in every mode, "always" remembered for that host). ``every_time``: why this request
        asks with "always" never on offer (it reaches this machine or its network)."""
        action = Action(self.tool_name, self.tool_kind, True, (), scope=host)
        ruling = Ruling("ask", every_time, False) if every_time else self.policy.network_ruling(action)
        await self._gate(action, title=title, ruling=ruling)

    async def ask_yes_no(self, title: str, detail: str) -> bool:
        """Ask the user a question the host has (an unknown SSH host key); never remembered."""
        action = Action(self.tool_name, self.tool_kind, True, ())
        try:
            await self._gate(action, title=title, detail=detail, ruling=Ruling("ask", detail, False))
        except ToolRejected:
            return False
        return True

    async def require_write(self, title: str, *, flagged: str = "") -> None:
        """Let a learning write (a memory entry, a skill) go ahead as the policy rules: its
        refusals stand (read-only mode); unflagged text needs no question; text screening
        ``flagged`` asks (and is refused where nobody is asked). Raises ToolRejected on no."""
        action = Action(self.tool_name, self.tool_kind, False, ())
        await self._gate(action, title=title, ruling=self.policy.learning_ruling(action, flagged))

    def session_store(self) -> SessionStore:
        """The session's open store; a ToolError where the surface gives tools none."""
        if self.store is None:
            raise ToolError(f"{self.tool_name} needs the session store, which this surface does not give tools.")
        return self.store

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
                moved = change.after if change.after is not None else change.before.text if change.before is not None else ""
                self.files.saw(change.move_to, moved)
            elif change.after is not None:
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
            machine = getattr(self.host, "checkpoint_files", None)  # another machine's files
            if written:
                await store.record_written(self.session_id, turn, paths, machine)
            else:
                await store.snapshot(self.session_id, turn, paths, machine)
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

    async def run_command(self, command: str, cwd: Path, *, timeout: float, output_limit: int) -> tuple[CommandResult, str]:
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

    async def start_command(self, command: str, cwd: Path, *, output_limit: int) -> BackgroundCommand:
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

    def _shown(self, diff: FileDiff) -> FileDiff:
        """A diff as the user is asked about it: its path as the host names it."""
        display = getattr(self.host, "display_path", None)
        return diff.model_copy(update={"path": display(diff.path)}) if callable(display) else diff

    async def _gate(
        self,
        action: Action,
        *,
        title: str,
        diffs: list[FileDiff] | None = None,
        command: str | None = None,
        detail: str = "",
        ruling: Ruling | None = None,
    ) -> Ruling:
        ruling = ruling if ruling is not None else self.policy.ruling(action)
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
                diffs=[self._shown(d) for d in diffs or []],
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
            verdict_word: RuleDecision = "allow" if decision.allowed else "deny"
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
