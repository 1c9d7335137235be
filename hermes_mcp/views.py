"""What the tools return: typed results (their JSON schemas become ``outputSchema``), kept small.

Every result travels twice (as JSON text and as ``structuredContent``), and Claude Desktop
rejects results over 1 MB; each result here is held under ``RESULT_BUDGET`` bytes of JSON so
that both copies together stay under 100 KB. Long texts are cut with a marker saying how to
read the rest.
"""

from __future__ import annotations

import datetime
import difflib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from core.events import ApprovalRequest

__all__ = [
    "RESULT_BUDGET",
    "ApprovalAnswer",
    "ApprovalView",
    "ApprovalsList",
    "ChangedFile",
    "MemoryFileView",
    "MemoryAdded",
    "MemoryView",
    "MessageView",
    "SearchHitView",
    "SearchPage",
    "SessionInfo",
    "SessionPage",
    "SessionsPage",
    "SkillInfo",
    "SkillText",
    "SkillsList",
    "Step",
    "TaskView",
    "clip",
    "diff_preview",
    "clip_tail",
    "request_view",
    "iso",
    "json_size",
    "unified_diff",
]

DIFF_PREVIEW = 6_000
RESULT_BUDGET = 45_000
TaskStatus = Literal["running", "needs_approval", "done", "failed", "cancelled"]


def iso(timestamp: float | None) -> str | None:
    """A Unix time as ISO 8601 UTC."""
    if timestamp is None:
        return None
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat(timespec="seconds")


def clip(text: str, limit: int, hint: str = "") -> tuple[str, bool]:
    """The head of ``text`` within ``limit`` characters, with a marker when cut."""
    if len(text) <= limit:
        return text, False
    marker = f"\n[cut: {len(text) - limit} more characters{'; ' + hint if hint else ''}]"
    return text[:limit] + marker, True


def clip_tail(text: str, limit: int, hint: str = "") -> tuple[str, bool]:
    """The tail of ``text`` within ``limit`` characters (the newest part of a reply), marked when cut."""
    if len(text) <= limit:
        return text, False
    marker = f"[{len(text) - limit} earlier characters cut{'; ' + hint if hint else ''}]\n"
    return marker + text[-limit:], True


def json_size(model: BaseModel) -> int:
    """Bytes of the model's compact JSON."""
    return len(model.model_dump_json().encode())


def unified_diff(path: str, old: str | None, new: str | None, cwd: Path | None = None) -> str:
    """A git-style unified diff of one file; paths relative to ``cwd`` when inside it."""
    shown = path
    if cwd is not None:
        try:
            shown = str(Path(path).relative_to(cwd))
        except ValueError:
            pass
    before = (old or "").splitlines(keepends=True)
    after = (new or "").splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            before,
            after,
            "/dev/null" if old is None else f"a/{shown}",
            "/dev/null" if new is None else f"b/{shown}",
        )
    )
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:  # the file's last line has no newline
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


class Step(BaseModel):
    """One tool call the agent made."""

    id: str
    tool: str
    title: str
    status: Literal["running", "completed", "failed"]


class ChangedFile(BaseModel):
    path: str = Field(description="absolute path")
    diff: str = Field(description="unified diff of the task's changes to this file")
    truncated: bool = False


class ApprovalView(BaseModel):
    """A question waiting for the user, from this server or from any editor or gateway session."""

    approval_id: str
    title: str
    reason: str = ""
    tool: str
    command: str | None = None
    paths: list[str] = Field(default_factory=list)
    diff: str | None = Field(default=None, description="what the change would do, when known")
    session_id: str
    session_title: str | None = None
    cwd: str | None = None
    surface: str | None = Field(default=None, description="where the session runs: mcp, acp (an editor), gateway")
    task_id: str | None = Field(default=None, description="the task of this server that waits, if any")
    can_always: bool = Field(default=False, description="whether the user may answer 'always' for this project")
    created_at: str | None = None


class ApprovalsList(BaseModel):
    approvals: list[ApprovalView]
    how_to_answer: str = Field(default="", description="who answers these, and where")


class ApprovalAnswer(BaseModel):
    approval_id: str
    outcome: Literal["answered", "already_answered"]
    decision: str = Field(description="the decision that counts")
    note: str = ""


class TaskView(BaseModel):
    """Where a task stands. ``next`` says what to do now."""

    task_id: str
    session_id: str
    status: TaskStatus
    cwd: str
    mode: str
    title: str | None = None
    reply: str = Field(default="", description="the agent's reply so far (its newest part when long)")
    reply_truncated: bool = False
    steps: list[Step] = Field(default_factory=list, description="tool calls, newest last")
    approvals: list[ApprovalView] = Field(default_factory=list, description="questions this task waits on")
    changed_files: list[ChangedFile] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list)
    stop_reason: str | None = None
    error: str | None = None
    elapsed_seconds: float = 0.0
    next: str = ""


class SessionInfo(BaseModel):
    session_id: str
    title: str | None = None
    cwd: str
    surface: str
    model: str | None = None
    parent_id: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    tokens: int = 0


class SessionsPage(BaseModel):
    sessions: list[SessionInfo]
    next_cursor: str | None = Field(default=None, description="pass as cursor for the next page; null at the end")


class SearchHitView(BaseModel):
    session_id: str
    session_title: str | None = None
    seq: int = Field(description="message position; session_read(after=seq-1) starts at it")
    role: str
    snippet: str = Field(description="matches in [brackets]")
    created_at: str | None = None


class SearchPage(BaseModel):
    hits: list[SearchHitView]
    next_cursor: str | None = None


class MessageView(BaseModel):
    seq: int
    role: Literal["user", "assistant", "tool_result", "summary"]
    text: str = ""
    tool_calls: list[str] = Field(default_factory=list, description="tool calls as name(arguments)")
    tool_name: str | None = None
    is_error: bool = False
    truncated: bool = False


class SessionPage(BaseModel):
    session: SessionInfo
    messages: list[MessageView]
    total_messages: int
    next_after: int | None = Field(default=None, description="pass as after to read on; null at the end")


class SkillInfo(BaseModel):
    name: str
    description: str = ""
    origin: Literal["personal", "project", "bundled"]
    path: str


class SkillsList(BaseModel):
    skills: list[SkillInfo]
    folders: list[str] = Field(description="where skills are looked for")


class SkillText(BaseModel):
    name: str
    description: str = ""
    origin: Literal["personal", "project", "bundled"]
    path: str
    text: str
    truncated: bool = False


class MemoryFileView(BaseModel):
    file: Literal["memory", "user"]
    label: str
    path: str
    text: str
    truncated: bool = False


class MemoryView(BaseModel):
    files: list[MemoryFileView]


class MemoryAdded(BaseModel):
    file: Literal["memory", "user"]
    path: str
    entry: str


def dumps(model: BaseModel) -> str:
    """Compact JSON of a result (the text copy)."""
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


def diff_preview(request: Any, session: Any) -> str | None:
    """A request's changes as a unified diff, clipped for a form or a result."""
    diffs = getattr(request, "diffs", None) or []
    if not diffs:
        return None
    cwd = getattr(session, "cwd", None)
    text = "".join(unified_diff(d.path, d.old_text, d.new_text, cwd) for d in diffs)
    return clip(text, DIFF_PREVIEW, "the full change is applied as shown in the editor")[0]


def request_view(request: ApprovalRequest, session: Any, *, task_id: str | None = None) -> ApprovalView:
    """An in-process question as a result."""
    return ApprovalView(
        approval_id=request.id,
        title=request.title,
        reason=request.reason or "",
        tool=request.tool_name,
        command=request.command,
        paths=list(request.paths),
        diff=diff_preview(request, session),
        session_id=request.session_id,
        session_title=getattr(session, "title", None),
        cwd=str(session.cwd) if session is not None else None,
        surface="mcp",
        task_id=task_id,
        can_always=request.offer_always,
    )
