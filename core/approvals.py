"""Approvals: one policy decides allow / ask / refuse for every tool action; a broker asks.

A question becomes a row in the store's approvals table and a ``PermissionNeeded`` event;
whichever surface answers first wins (atomically, in the store). "Always" answers become
rules remembered per project in the store, outside the repository. Timeouts deny.
"""

from __future__ import annotations

import asyncio
import enum
import fnmatch
import logging
import os
import re
import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from core.messages import FileDiff

if TYPE_CHECKING:
    from core.store import SessionStore

__all__ = [
    "Action",
    "ApprovalBroker",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Decision",
    "Mode",
    "Verdict",
]

log = logging.getLogger(__name__)

Mode = Literal["read-only", "ask", "accept-edits", "auto"]
Verdict = Literal["allow", "ask", "refuse"]


class Decision(str, enum.Enum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"
    CANCELLED = "cancelled"

    @property
    def allowed(self) -> bool:
        return self in (Decision.ALLOW_ONCE, Decision.ALLOW_ALWAYS)


@dataclass(frozen=True, slots=True)
class Action:
    """What a tool call is about to do, as the policy sees it."""

    tool: str
    kind: str  # ACP tool kind
    read_only: bool
    paths: tuple[Path, ...] = ()
    command: str | None = None


@dataclass(slots=True)
class ApprovalRequest:
    """One question to the user. Surfaces show ``title``, ``diffs`` and ``command``."""

    session_id: str
    tool_call_id: str
    tool_name: str
    tool_kind: str
    title: str
    reason: str
    diffs: list[FileDiff] = field(default_factory=list)
    command: str | None = None
    paths: list[str] = field(default_factory=list)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    future: asyncio.Future | None = None


# Secrets always ask, whatever the mode or rules.
_SECRET_PATTERNS = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ed25519*",
    "id_ecdsa*",
    "*.p12",
    "*.pfx",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "credentials*",
    "*secret*",
)
_SECRET_DIRS = {".ssh", ".gnupg", ".aws", ".kube", ".docker"}

# Commands no approval unlocks: they destroy a machine, not a project.
_REFUSED_PROGRAMS = {"shutdown", "reboot", "halt", "poweroff", "mkfs", "fdisk", "mkswap"}
_REFUSED_FRAGMENTS = (":(){", "of=/dev/sd", "of=/dev/nvme", "of=/dev/disk", "> /dev/sd", "chmod -R 777 /")
_PRECOMMANDS = {"sudo", "doas", "env", "nohup", "nice", "time", "command", "exec"}
_ROOT_TARGETS = {"/", "/*", "~", "~/", "~/*", "$HOME", "${HOME}", "$HOME/", "/home", "/usr", "/etc", "/var"}

def is_secret_path(path: Path) -> bool:
    """True for files that commonly hold credentials (.env, keys, ~/.ssh ...)."""
    if any(part in _SECRET_DIRS for part in path.parts):
        return True
    name = path.name.lower()
    return any(fnmatch.fnmatch(name, pattern) for pattern in _SECRET_PATTERNS) and name not in (
        ".env.example",
        ".env.sample",
        ".env.template",
    )


def within(path: Path, roots: list[Path]) -> bool:
    """True when ``path`` (already resolved) lies under one of ``roots`` (resolved)."""
    return any(path == root or root in path.parents for root in roots)


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


def hard_refused(command: str) -> str | None:
    """The rule a command breaks that no approval unlocks, if any.

    Each segment of the line (split at ``;``, ``&&``, ``||``, pipes and substitutions) is
    checked on its own, so ``echo shutdown`` is fine and ``make && sudo shutdown`` is not.
    """
    normalised = " ".join(command.split())
    for fragment in _REFUSED_FRAGMENTS:
        if fragment in normalised:
            return fragment
    for segment in re.split(r"&&|\|\||;|\||\$\(|`|\n", command):
        try:
            words = shlex.split(segment, posix=True)
        except ValueError:
            words = segment.split()
        while words and (words[0] in _PRECOMMANDS or ("=" in words[0] and words[0].split("=", 1)[0].isidentifier())):
            words = words[1:]
        if not words:
            continue
        program = os.path.basename(words[0])
        if program in _REFUSED_PROGRAMS or program.startswith("mkfs."):
            return program
        if program == "rm":
            flags = "".join(w.lstrip("-") for w in words[1:] if w.startswith("-") and not w.startswith("--"))
            recursive = "r" in flags.lower() or "--recursive" in words
            if recursive and any(w in _ROOT_TARGETS for w in words[1:] if not w.startswith("-")):
                return "rm -r on / or a home directory"
    return None


@dataclass(slots=True)
class ApprovalPolicy:
    """Decides, for one action in one session: allow, ask, or refuse (with the reason)."""

    mode: Mode = "ask"
    roots: list[Path] = field(default_factory=list)
    # (tool, pattern, decision) remembered for this project.
    rules: list[tuple[str, str, str]] = field(default_factory=list)

    def decide(self, action: Action) -> tuple[Verdict, str]:
        if action.command is not None and (rule := hard_refused(action.command)):
            return "refuse", f"the command matches '{rule}', which is never run"
        outside = [p for p in action.paths if not within(p, self.roots)]
        secrets = [p for p in action.paths if is_secret_path(p)]
        if self.mode == "read-only" and not action.read_only:
            return "refuse", "the session is in read-only mode; switch mode to allow changes"
        if secrets:
            return "ask", f"{secrets[0]} may hold secrets"
        if outside:
            return "ask", f"{outside[0]} is outside the project"
        if action.read_only:
            return "allow", "reads inside the project are allowed"
        rule = self._matching_rule(action)
        if rule == "deny":
            return "refuse", "you chose to always reject this"
        if rule == "allow":
            return "allow", "you chose to always allow this"
        if self.mode == "auto":
            return "allow", "auto mode"
        if self.mode == "accept-edits" and action.kind in ("edit", "delete", "move"):
            return "allow", "accept-edits mode"
        return "ask", "changes and commands need your approval"

    def rule_key(self, action: Action) -> tuple[str, str]:
        """What an 'always' answer remembers: the tool, and for commands the program."""
        if action.command is not None:
            return action.tool, command_program(action.command) or "*"
        return action.tool, "*"

    def _matching_rule(self, action: Action) -> str | None:
        tool, pattern = self.rule_key(action)
        for rule_tool, rule_pattern, decision in self.rules:
            if rule_tool == tool and (rule_pattern == "*" or rule_pattern == pattern):
                return decision
        return None


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
                detail={"reason": request.reason, "command": request.command, "paths": request.paths},
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
        except asyncio.TimeoutError:
            await self.answer(request.id, Decision.CANCELLED, by="timeout", status="expired")
            return Decision.CANCELLED
        except asyncio.CancelledError:
            await asyncio.shield(self.answer(request.id, Decision.CANCELLED, by="cancel", status="cancelled"))
            raise
        finally:
            self._pending.pop(request.id, None)

    async def answer(self, approval_id: str, decision: Decision, *, by: str, status: str | None = None) -> bool:
        """Answer a pending question. Returns False when another answer got there first."""
        request = self._pending.get(approval_id)
        open_here = request is not None and request.future is not None and not request.future.done()
        status = status or ("allowed" if decision.allowed else "denied")
        if self._store is not None:
            try:
                won = await self._store.resolve_approval(approval_id, status, by)
            except Exception:  # the store must never leave a question hanging
                log.exception("could not record approval %s", approval_id)
                won = open_here
        else:
            won = open_here
        if won and request is not None and request.future is not None and not request.future.done():
            request.future.set_result(decision)
        return won
