"""Approvals over MCP: list the questions waiting anywhere, answer them, ask through elicitation.

Questions asked by this server's tasks are answered through the in-process broker (which also
records the answer in the store). Questions of other processes (an editor's ``hermes-acp``,
the gateway) are answered in the store, where the first answer wins; the process that asked
notices the answer (see ``core.approval_watch``). The store keeps allow/deny, not "always",
so "always" answers count once for other processes' questions.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from hermes_mcp.views import ApprovalAnswer, ApprovalView, clip, iso, unified_diff

if TYPE_CHECKING:
    from core.approvals import ApprovalRequest
    from hermes_mcp.runtime import Runtime

__all__ = [
    "AllowOnce",
    "AllowOrAlways",
    "ApprovalChoice",
    "Decision",
    "elicitation_message",
    "elicitation_schema",
    "list_approvals",
    "request_view",
    "respond",
]

Decision = Literal["allow", "allow_always", "deny", "deny_always"]
DIFF_PREVIEW = 6_000
_CORE_DECISIONS = {
    "allow": "allow_once",
    "allow_always": "allow_always",
    "deny": "reject_once",
    "deny_always": "reject_always",
}


class ApprovalChoice(Exception):
    """The answer cannot be given (unknown id, an 'always' where it is not offered)."""


class AllowOrAlways(BaseModel):
    """The elicitation form when 'always' may be offered."""

    decision: Literal["allow", "allow_always", "deny", "deny_always"] = Field(
        title="Your answer", description="allow or deny this once, or always for this project"
    )


class AllowOnce(BaseModel):
    """The elicitation form for what must ask every time (secrets, outside the project, risky commands)."""

    decision: Literal["allow", "deny"] = Field(title="Your answer", description="allow or deny this action")


def elicitation_schema(request: ApprovalRequest) -> type[BaseModel]:
    return AllowOrAlways if request.offer_always else AllowOnce


def _diff_preview(request: Any, session: Any) -> str | None:
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
        diff=_diff_preview(request, session),
        session_id=request.session_id,
        session_title=getattr(session, "title", None),
        cwd=str(session.cwd) if session is not None else None,
        surface="mcp",
        task_id=task_id,
        can_always=request.offer_always,
    )


def elicitation_message(request: ApprovalRequest, session: Any) -> str:
    """What the user reads in the client's form: the action, why it asks, and the change."""
    lines = [f"Hermes wants to: {request.title}"]
    where = getattr(session, "title", None) or request.session_id[:8]
    lines.append(f"Session: {where} ({getattr(session, 'cwd', '')})")
    if request.reason:
        lines.append(f"Asking because {request.reason}.")
    if request.command:
        lines.append(f"Command: {request.command}")
    preview = _diff_preview(request, session)
    if preview:
        lines.append("")
        lines.append(preview)
    return "\n".join(lines)


def _local_requests(runtime: Runtime) -> dict[str, ApprovalRequest]:
    agent = runtime.agent_if_built
    if agent is None:
        return {}
    return {r.id: r for r in agent.broker.pending if r.future is not None and not r.future.done()}


async def list_approvals(runtime: Runtime, session_id: str | None = None) -> list[ApprovalView]:
    """Every open question: this server's tasks' and those of editor and gateway sessions."""
    store = await runtime.store()
    local = _local_requests(runtime)
    # A row older than the approval timeout belongs to a process that is gone (it would
    # have expired the row itself): nobody waits for that answer any more.
    cutoff = time.time() - runtime.approval_timeout
    sessions: dict[str, Any] = {}
    out: list[ApprovalView] = []
    for row in await store.pending_approvals(session_id):
        if row.id in local:
            request = local[row.id]
            task = runtime.tasks.for_request(row.id)
            view = request_view(request, task.session if task else None, task_id=task.id if task else None)
            view.created_at = iso(row.created_at)
            out.append(view)
            continue
        if row.created_at < cutoff:
            continue
        if row.session_id not in sessions:
            sessions[row.session_id] = await store.get_session(row.session_id)
        record = sessions[row.session_id]
        detail = row.detail or {}
        out.append(
            ApprovalView(
                approval_id=row.id,
                title=row.title,
                reason=str(detail.get("reason") or ""),
                tool=row.tool_name,
                command=detail.get("command"),
                paths=[str(p) for p in detail.get("paths") or []],
                session_id=row.session_id,
                session_title=record.title if record else None,
                cwd=record.cwd if record else None,
                surface=record.surface if record else None,
                can_always=row.offers_always,
                created_at=iso(row.created_at),
            )
        )
    return out


async def respond(runtime: Runtime, approval_id: str, decision: Decision) -> ApprovalAnswer:
    """Answer one question; the first answer from anywhere wins."""
    from core.approvals import Decision as CoreDecision

    if decision not in _CORE_DECISIONS:
        raise ApprovalChoice(f"decision must be one of {', '.join(_CORE_DECISIONS)}")
    local = _local_requests(runtime)
    request = local.get(approval_id)
    if request is not None:
        if decision.endswith("_always") and not request.offer_always:
            raise ApprovalChoice("this action asks every time; answer 'allow' or 'deny'")
        agent = runtime.agent_if_built
        assert agent is not None
        won = await agent.broker.answer(approval_id, CoreDecision(_CORE_DECISIONS[decision]), by="mcp")
        if won:
            return ApprovalAnswer(approval_id=approval_id, outcome="answered", decision=decision)
        return await _already(runtime, approval_id)
    store = await runtime.store()
    row = await store.get_approval(approval_id)
    if row is None:
        raise ApprovalChoice(f"No approval {approval_id!r}; list the open ones with approvals_list.")
    if row.status != "pending":
        return await _already(runtime, approval_id)
    always = decision.endswith("_always")
    if always and not row.offers_always:
        raise ApprovalChoice("this action asks every time; answer 'allow' or 'deny'")
    allowed = decision.startswith("allow")
    won = await store.resolve_approval(approval_id, "allowed" if allowed else "denied", "mcp", always=always)
    if not won:
        return await _already(runtime, approval_id)
    return ApprovalAnswer(approval_id=approval_id, outcome="answered", decision=decision)


async def _already(runtime: Runtime, approval_id: str) -> ApprovalAnswer:
    store = await runtime.store()
    row = await store.get_approval(approval_id)
    status = row.status if row else "unknown"
    by = f" by {row.decided_by}" if row and row.decided_by else ""
    return ApprovalAnswer(
        approval_id=approval_id,
        outcome="already_answered",
        decision={"allowed": "allow", "denied": "deny"}.get(status, status),
        note=f"It was already answered{by} ({status}); the first answer counts.",
    )
