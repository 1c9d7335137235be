"""Approvals: one policy decides allow / ask / refuse for every tool action; a broker asks.

A question becomes a row in the store's approvals table and a ``PermissionNeeded`` event;
whichever surface answers first wins (atomically, in the store). "Always" answers become
rules remembered per project in the store, outside the repository. Timeouts deny.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, get_args

from core.events import ApprovalRequest, Decision
from core.host.sandbox import Grants
from core.host.sandbox import status as sandbox_status
from core.paths import is_secret_path, protected_entry, protected_reason, within
from core.policy.command_rules import Assessment, assess

if TYPE_CHECKING:
    from core.store import ApprovalStatus, SessionStore

__all__ = [
    "MODES",
    "as_mode",
    "Action",
    "ApprovalBroker",
    "ApprovalPolicy",
    "Mode",
    "Ruling",
    "Verdict",
    "command_program",
    "hard_refused",
]

log = logging.getLogger(__name__)

Mode = Literal["read-only", "ask", "accept-edits", "auto"]
MODES: tuple[Mode, ...] = get_args(Mode)


def as_mode(text: str) -> Mode:
    """``text`` as a mode; a ValueError that names the modes when it is none of them."""
    for mode in MODES:
        if text == mode:
            return mode
    raise ValueError(f"unknown mode {text!r}; the modes are {', '.join(MODES)}")


Verdict = Literal["allow", "ask", "refuse"]


@dataclass(frozen=True, slots=True)
class Action:
    """What a tool call is about to do, as the policy sees it."""

    tool: str
    kind: str  # ACP tool kind
    read_only: bool
    paths: tuple[Path, ...] = ()
    command: str | None = None
    # What the call itself asks for beyond the sandbox (run_command's network, write_paths, sandbox).
    wants: Grants = Grants()
    # What an "always" answer is scoped to besides the tool (the host a web request goes to); "": the tool.
    scope: str = ""


class Ruling(NamedTuple):
    """The policy's answer for one action; for commands, what the sandbox must add to run it."""

    verdict: Verdict
    reason: str
    offer_always: bool = True
    grants: Grants = Grants()
    # Something to tell the user once per session (no sandbox on this machine, say).
    notice: str = ""


def command_program(command: str) -> str:
    """The program a command line runs first, skipping env assignments (``FOO=1 pytest`` -> pytest)."""
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
    for word in words:
        if "=" in word and not word.startswith(("=", "-")) and word.split("=", 1)[0].isidentifier():
            continue
        return os.path.basename(word)
    return ""


def hard_refused(command: str, cwd: Path | None = None) -> str | None:
    """Why no approval unlocks ``command`` (rm -rf /, a fork bomb, mkfs ...), or None.

    The line is parsed: ``echo shutdown`` is fine and ``make && sudo shutdown`` is not.
    """
    verdict = assess(command, cwd or Path.cwd())
    return verdict.reason if verdict.level == "hard" else None


@dataclass(slots=True)
class _Needs:
    """What a command needs beyond the sandbox's defaults."""

    network: bool = False
    unconfined: bool = False
    host: str = ""  # what a program needs of this machine that the sandbox hides (credentials, an engine)
    outside: list[Path] = field(default_factory=list)  # folders or files outside the roots
    protected: list[Path] = field(default_factory=list)  # protected entries inside the roots
    repository: list[Path] = field(default_factory=list)  # the .git a git command changes

    @property
    def grants(self) -> Grants:
        writable = tuple(dict.fromkeys([*self.outside, *self.protected, *self.repository]))
        return Grants(network=self.network, writable=writable, unconfined=self.unconfined or bool(self.host))

    def words(self) -> str:
        """The needs a question may offer "always" for: the host, the network, the repository."""
        parts = [self.host] if self.host else []
        parts += ["the network"] if self.network and not self.host else []
        parts += [f"to write the repository ({d})" for d in self.repository[:1]]
        return " and ".join(parts)


@dataclass(slots=True)
class ApprovalPolicy:
    """Decides, for one action in one session: allow, ask, or refuse (with the reason).

    Commands that a mode lets run without a question run inside the OS sandbox; the policy only
    says what the sandbox must add (``Ruling.grants``) and asks for exactly that.
    """

    mode: Mode = "ask"
    roots: list[Path] = field(default_factory=list)
    # (tool, pattern, decision) remembered for this project.
    rules: list[tuple[str, str, str]] = field(default_factory=list)
    home: Path | None = None  # for telling rm -rf ~ apart; the user's home when None
    # Whether commands run in an OS sandbox here; None: probe this machine once.
    sandbox: bool | None = None
    sandbox_detail: str = ""
    said: set[str] = field(default_factory=set)  # notices already given in this session

    def decide(self, action: Action) -> tuple[Verdict, str]:
        """The verdict and its reason (see ``ruling`` for whether "always" may be offered)."""
        ruling = self.ruling(action)
        return ruling.verdict, ruling.reason

    def ruling(self, action: Action) -> Ruling:
        if action.command is not None:
            return self._command(action)
        if self.mode == "read-only" and not action.read_only:
            return Ruling("refuse", "the session is in read-only mode; switch mode to allow changes", False)
        outside = [p for p in action.paths if not within(p, self.roots)]
        if outside and not action.read_only:
            roots = ", ".join(str(r) for r in self.roots)
            return Ruling("refuse", f"{outside[0]} is outside the project; changes are confined to {roots}", False)
        secrets = [p for p in action.paths if is_secret_path(p)]
        if secrets:
            return Ruling("ask", f"{secrets[0]} may hold secrets", False)
        if outside:
            return Ruling("ask", f"{outside[0]} is outside the project", False)
        if action.read_only:
            return Ruling("allow", "reads inside the project are allowed")
        if reason := next((r for p in action.paths if (r := protected_reason(p))), None):
            return Ruling("ask", reason, False)
        rule = self._matching_rule(action)
        if rule == "deny":
            return Ruling("refuse", "you chose to always reject this")
        if rule == "allow":
            return Ruling("allow", "you chose to always allow this")
        if self.mode == "auto":
            return Ruling("allow", "auto mode")
        if self.mode == "accept-edits" and action.kind in ("edit", "delete", "move"):
            return Ruling("allow", "accept-edits mode")
        return Ruling("ask", "changes need your approval")

    def learning_ruling(self, action: Action, flagged: str = "") -> Ruling:
        """A learning write (a memory entry, a skill): the policy's refusals stand; unflagged text
        goes ahead; text screening ``flagged`` asks every time (never "always"), and is refused in
        auto mode, where nobody is asked."""
        base = self.ruling(action)
        if base.verdict == "refuse":
            return base
        if not flagged:
            return Ruling("allow", "learning writes ask only when screening flags them")
        if self.mode == "auto":
            return Ruling(
                "refuse",
                f"screening flagged it ({flagged}) and auto mode asks nobody, so nothing was saved. "
                "Leave it out, or let the user save it in ask or accept-edits mode, where they are asked",
                False,
            )
        return Ruling("ask", f"screening flagged it: {flagged}", False)

    def network_ruling(self, action: Action) -> Ruling:
        """A request that leaves this machine for ``action.scope`` (a host): what it sends (the URL
        itself) can carry data out, and no sandbox stands between, so it asks in every mode unless
        "always" was answered for that host; "always" is on offer."""
        rule = self._matching_rule(action)
        if rule == "deny":
            return Ruling("refuse", f"you chose to always reject requests to {action.scope}", False)
        if rule == "allow":
            return Ruling("allow", f"you chose to always allow requests to {action.scope}")
        return Ruling("ask", f"it sends a request to {action.scope}, and what it sends (the URL too) leaves this machine")

    @property
    def sandboxed(self) -> bool:
        """Whether commands run in the OS sandbox (probed on first use)."""
        if self.sandbox is None:
            found = sandbox_status()
            self.sandbox, self.sandbox_detail = found.active, found.detail
        return self.sandbox

    def _command(self, action: Action) -> Ruling:
        assert action.command is not None
        cwd = action.paths[0] if action.paths else (self.roots[0] if self.roots else Path.cwd())
        found = assess(action.command, cwd, self.roots, self.home)
        if found.level == "hard":
            return Ruling("refuse", f"{found.reason}; such commands are never run", False)
        if self.mode == "read-only":
            return Ruling("refuse", "the session is in read-only mode; switch mode to run commands", False)
        home = Path(os.path.realpath(self.home or Path.home()))
        need = self._needs(action, found, cwd)
        grants = need.grants
        if asks_every_time := self._asks_every_time(action, found, cwd, home, need):
            return Ruling("ask", self._widening(asks_every_time, grants), False, grants)
        rules = [(pattern, decision) for tool, pattern, decision in self.rules if tool == action.tool]
        needed, every = self._rule_keys(found, need)
        if any(decision == "deny" and _covers(pattern, key) for pattern, decision in rules for key in every):
            return Ruling("refuse", "you chose to always reject this command", grants=grants)
        if needed and all(any(d == "allow" and _covers(p, key) for p, d in rules) for key in needed):
            return Ruling("allow", "you chose to always allow this command", grants=grants)
        if words := need.words():
            return Ruling("ask", self._widening(f"it needs {words} ({found.reason})", grants), True, grants)
        if self.mode == "ask":
            return Ruling("ask", f"commands need your approval ({found.reason})", grants=grants)
        if self.sandboxed:
            return Ruling("allow", f"{self.mode} mode: it runs in the sandbox (project writable, no network)", grants=grants)
        if found.level == "safe":
            return Ruling("allow", "it only reads", grants=grants)
        notice = (
            f"No sandbox is active ({self.sandbox_detail or 'none found'}): in {self.mode} mode every command "
            "that does more than read asks first."
        )
        return Ruling("ask", f"there is no sandbox to run it in, and {found.reason}", grants=grants, notice=notice)

    def _widening(self, reason: str, grants: Grants) -> str:
        """The reason, and what an approval would add to the sandbox."""
        if not grants or not self.sandboxed:
            return reason
        if grants.unconfined:
            return f"{reason}; if you allow it, it runs outside the sandbox"
        return f"{reason}; if you allow it, it runs in the sandbox with {grants.describe()}"

    def _needs(self, action: Action, found: Assessment, cwd: Path) -> _Needs:
        """What the sandbox must add for this command."""
        need = _Needs(network=found.network or action.wants.network, unconfined=action.wants.unconfined)
        for path in [*found.writes, *action.wants.writable]:
            if within(path, self.roots):
                entry = protected_entry(path)
                if entry is not None and entry not in need.protected:
                    need.protected.append(entry)  # the whole entry, as the sandbox binds it read-only
                continue
            # A file that does not exist yet is made in its nearest existing folder, so that is what is granted.
            path = _existing(path)
            if path not in need.outside:
                need.outside.append(path)
        if _changes_repository(found):
            need.repository = [d for d in _git_dirs(cwd, self.roots) if d not in need.protected]
        need.host = _host_access(found)
        return need

    def _asks_every_time(self, action: Action, found: Assessment, cwd: Path, home: Path, need: _Needs) -> str:
        """Why this command asks in every mode with "always" never offered, or ""."""
        if found.level == "dangerous":
            return found.reason
        if secrets := [p for p in (*found.reads, *found.writes) if is_secret_path(p) and not within(p, need.repository)]:
            return f"it touches {secrets[0]}, which may hold secrets"
        if outside := [p for p in found.writes if not within(p, self.roots)]:
            return f"it writes outside the project ({outside[0]})"
        if outside := [p for p in found.reads if not within(p, self.roots) and _private_read(p, home)]:
            return f"it reads outside the project ({outside[0]})"
        if need.protected:
            return protected_reason(need.protected[0]) or f"it writes {need.protected[0]}"
        if action.wants.writable:
            return "it asks to write " + ", ".join(str(p) for p in action.wants.writable[:3])
        if not within(cwd, self.roots):
            return f"it runs outside the project ({cwd})"
        if action.wants.unconfined:
            return "it asks to run outside the sandbox, with full access to this machine"
        return ""

    def _rule_keys(self, found: Assessment, need: _Needs) -> tuple[list[str], list[str]]:
        """Keys an "always" rule must cover (needed, every command). A rule made when a command
        needed the network or its repository (``net:``, ``repo:``) covers only such runs."""
        needed = list(found.keys or found.all_keys)
        prefix = "".join(p for p, on in (("host:", bool(need.host)), ("net:", need.network), ("repo:", bool(need.repository))) if on)
        return [prefix + k for k in needed], list(found.all_keys)

    def rule_key(self, action: Action) -> tuple[str, str]:
        """What an 'always' answer remembers: the tool, and for commands the program (and subcommand)."""
        if action.command is not None:
            cwd = action.paths[0] if action.paths else Path.cwd()
            found = assess(action.command, cwd, self.roots, self.home)
            keys = self._rule_keys(found, self._needs(action, found, cwd))[0]
            return action.tool, keys[0] if keys else "*"
        return action.tool, action.scope or "*"

    def _matching_rule(self, action: Action) -> str | None:
        tool, pattern = self.rule_key(action)
        for rule_tool, rule_pattern, decision in self.rules:
            if rule_tool == tool and (rule_pattern == "*" or rule_pattern == pattern):
                return decision
        return None


# Programs that need what the sandbox hides: credentials (~/.ssh, ~/.aws, an agent's socket) or
# an engine's socket. Run with the network alone they would fail; they run outside the sandbox
# once the user says so (and "always" may be remembered for them).
_HOST_PROGRAMS = {
    "ssh": "your SSH keys",
    "scp": "your SSH keys",
    "sftp": "your SSH keys",
    "rsync": "your SSH keys",
    "gh": "your GitHub login",
    "hub": "your GitHub login",
    "glab": "your GitLab login",
    "aws": "your AWS credentials",
    "gcloud": "your Google Cloud login",
    "gsutil": "your Google Cloud login",
    "az": "your Azure login",
    "kubectl": "your Kubernetes credentials",
    "helm": "your Kubernetes credentials",
    "terraform": "your cloud credentials",
    "docker": "the Docker engine",
    "docker-compose": "the Docker engine",
    "podman": "the container engine",
    "nerdctl": "the container engine",
    "flyctl": "your Fly.io login",
    "heroku": "your Heroku login",
    "vercel": "your Vercel login",
    "netlify": "your Netlify login",
    "firebase": "your Firebase login",
}
_HOST_GIT = {"git push", "git pull", "git fetch", "git clone", "git ls-remote", "git submodule", "git remote", "git send-email"}


def _host_access(found: Assessment) -> str:
    """What of this machine the command needs that the sandbox hides, in words ("" for nothing)."""
    for key in found.keys:
        program = key.split(" ", 1)[0]
        if key in _HOST_GIT:  # a git key is "git SUBCOMMAND"
            return "your git credentials (SSH keys, credential helper), outside the sandbox"
        if program in _HOST_PROGRAMS and (program != "rsync" or found.network):
            return f"{_HOST_PROGRAMS[program]}, outside the sandbox"
    return ""


def _existing(path: Path) -> Path:
    """``path``, or the nearest folder above it that exists."""
    while not os.path.lexists(path) and path.parent != path:
        path = path.parent
    return path


def _changes_repository(found: Assessment) -> bool:
    """Whether the line runs git in a way that writes the repository (commit, add, checkout ...)."""
    return any(key == "git" or key.startswith("git ") for key in found.keys)


def _git_dirs(cwd: Path, roots: list[Path]) -> list[Path]:
    """The ``.git`` of the repository ``cwd`` is in, when it lies in the roots."""
    for directory in (cwd, *cwd.parents):
        candidate = directory / ".git"
        if os.path.lexists(candidate):
            return [Path(os.path.realpath(candidate))] if within(directory, roots) else []
        if not within(directory, roots):
            break
    return []


def _private_read(path: Path, home: Path) -> bool:
    """Reads that ask: the user's files outside the project (home, its ancestors, other users'
    homes), not the system's (``/usr``, ``/etc/os-release``)."""
    return (
        path == Path("/")
        or path in home.parents
        or path == home
        or home in path.parents
        or str(path).startswith(("/home/", "/Users/", "/root"))
    )


def _covers(pattern: str, key: str) -> bool:
    """A remembered pattern covers a command key: "*", the same key, or the key's program."""
    return pattern == "*" or pattern == key or pattern == key.split(" ", 1)[0]


class ApprovalBroker:
    """Holds pending questions; the first answer, from any surface, wins."""

    def __init__(self, store: SessionStore | None = None, *, timeout: float = 1800.0) -> None:
        self._store = store
        self._timeout = timeout
        self._pending: dict[str, ApprovalRequest] = {}

    @property
    def pending(self) -> list[ApprovalRequest]:
        return list(self._pending.values())

    async def open(self, request: ApprovalRequest) -> ApprovalRequest:
        """Register a question (and its store row); returns it with a future to await."""
        request.future = asyncio.get_running_loop().create_future()
        self._pending[request.id] = request
        if self._store is not None:
            record = await self._store.create_approval(
                session_id=request.session_id,
                tool_call_id=request.tool_call_id,
                tool_name=request.tool_name,
                title=request.title,
                detail={"reason": request.reason, "command": request.command, "paths": request.paths, "offer_always": request.offer_always},
            )
            # Use the store's id so that other processes can answer by it.
            del self._pending[request.id]
            request.id = record.id
            self._pending[request.id] = request
        return request

    async def wait(self, request: ApprovalRequest) -> Decision:
        """Wait for the answer; a timeout or a cancelled turn denies."""
        assert request.future is not None
        try:
            return await asyncio.wait_for(asyncio.shield(request.future), self._timeout)
        except TimeoutError:
            await self.answer(request.id, Decision.CANCELLED, by="timeout", status="expired")
            return Decision.CANCELLED
        except asyncio.CancelledError:
            await asyncio.shield(self.answer(request.id, Decision.CANCELLED, by="cancel", status="cancelled"))
            raise
        finally:
            self._pending.pop(request.id, None)

    async def answer(self, approval_id: str, decision: Decision, *, by: str, status: ApprovalStatus | None = None) -> bool:
        """Answer a pending question. Returns False when another answer got there first."""
        request = self._pending.get(approval_id)
        open_here = request is not None and request.future is not None and not request.future.done()
        status = status or ("allowed" if decision.allowed else "denied")
        if self._store is not None:
            try:
                always = decision in (Decision.ALLOW_ALWAYS, Decision.REJECT_ALWAYS)
                won = await self._store.resolve_approval(approval_id, status, by, always=always)
            except Exception:  # the store must never leave a question hanging
                log.exception("could not record approval %s", approval_id)
                won = open_here
        else:
            won = open_here
        if won and request is not None and request.future is not None and not request.future.done():
            request.future.set_result(decision)
        return won
