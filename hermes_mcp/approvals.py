"""Approvals over MCP: list the questions waiting anywhere, ask this server's through elicitation.

Only a human answers a question. The client's form (elicitation) is the user's; a tool call is
the client's model's, so there is no tool to answer with unless hermes-mcp is started with
``--trust-client-approvals``, and even then it answers only questions this process's own tasks
asked, through the in-process broker (which records the answer in the store). Questions of
other processes (an editor's ``hermes-acp``, the gateway) are listed, never answered here: the
user answers them where they were asked, on the phone, or with ``hermes-editor approvals``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from hermes_mcp.views import ApprovalAnswer, ApprovalsList, ApprovalView, diff_preview, iso, request_view

if TYPE_CHECKING:
    from core.events import ApprovalRequest
    from hermes_mcp.backend import Backend
    from hermes_mcp.tasks import TaskManager

__all__ = [
    "AllowOnce",
    "AllowOrAlways",
    "ApprovalChoice",
    "approvals_list_view",
    "Decision",
    "elicitation_message",
    "elicitation_schema",
    "list_approvals",
    "respond",
]

Decision = Literal["allow", "allow_always", "deny", "deny_always"]
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


def elicitation_message(request: ApprovalRequest, session: Any) -> str:
    """What the user reads in the client's form: the action, why it asks, and the change."""
    lines = [f"Hermes wants to: {request.title}"]
    where = getattr(session, "title", None) or request.session_id[:8]
    lines.append(f"Session: {where} ({getattr(session, 'cwd', '')})")
    if request.reason:
        lines.append(f"Asking because {request.reason}.")
    if request.command:
        lines.append(f"Command: {request.command}")
    preview = diff_preview(request, session)
    if preview:
        lines.append("")
        lines.append(preview)
    return "\n".join(lines)


def _local_requests(backend: Backend) -> dict[str, ApprovalRequest]:
    agent = backend.agent_if_built
    if agent is None:
        return {}
    return {r.id: r for r in agent.broker.pending if r.future is not None and not r.future.done()}


async def list_approvals(backend: Backend, tasks: TaskManager, session_id: str | None = None) -> list[ApprovalView]:
    """Every open question: this server's tasks' and those of editor and gateway sessions."""
    store = await backend.store()
    local = _local_requests(backend)
    # A row older than the approval timeout belongs to a process that is gone (it would
    # have expired the row itself): nobody waits for that answer any more.
    cutoff = time.time() - backend.approval_timeout
    sessions: dict[str, Any] = {}
    out: list[ApprovalView] = []
    for row in await store.pending_approvals(session_id):
        if row.id in local:
            request = local[row.id]
            task = tasks.for_request(row.id)
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


def approvals_list_view(views: list[ApprovalView], client_answers: bool) -> ApprovalsList:
    """The list, with a note on who answers: the user, never the model."""
    how = (
        "Only the user answers these, never you. Show them the question and ask them to answer in a terminal with "
        "`hermes-editor approvals allow ID` (or `deny ID`), in their editor, on their phone, or in this client's "
        "approval form if it shows one."
    )
    if client_answers:
        how += " For this server's own tasks (task_id set) you may pass on the user's own decision with approval_respond."
    return ApprovalsList(approvals=views, how_to_answer=how)


async def respond(backend: Backend, tasks: TaskManager, approval_id: str, decision: Decision) -> ApprovalAnswer:
    """Answer one question this process's tasks asked; the first answer from anywhere wins."""
    from core.events import Decision as CoreDecision

    if decision not in _CORE_DECISIONS:
        raise ApprovalChoice(f"decision must be one of {', '.join(_CORE_DECISIONS)}")
    # Ownership is what this process asked, never what the store holds: a question of an
    # editor (hermes-acp) or of the gateway is theirs to answer, whatever its id.
    if tasks.for_request(approval_id) is None:
        store = await backend.store()
        if await store.get_approval(approval_id) is None:
            raise ApprovalChoice(f"No approval {approval_id!r}; a task's approvals list the ones it waits on.")
        raise ApprovalChoice(
            f"Approval {approval_id} was not asked by this server's tasks (it belongs to an editor or the gateway), "
            "so it cannot be answered here. The user answers it where it was asked, on their phone, "
            f"or in a terminal with `hermes-editor approvals allow {approval_id}` (or `deny {approval_id}`)."
        )
    request = _local_requests(backend).get(approval_id)
    if request is None:
        return await _already(backend, approval_id)
    if decision.endswith("_always") and not request.offer_always:
        raise ApprovalChoice("this action asks every time; answer 'allow' or 'deny'")
    agent = backend.agent_if_built
    assert agent is not None
    won = await agent.broker.answer(approval_id, CoreDecision(_CORE_DECISIONS[decision]), by="mcp-client")
    if won:
        return ApprovalAnswer(approval_id=approval_id, outcome="answered", decision=decision)
    return await _already(backend, approval_id)


async def _already(backend: Backend, approval_id: str) -> ApprovalAnswer:
    store = await backend.store()
    row = await store.get_approval(approval_id)
    status = row.status if row else "unknown"
    by = f" by {row.decided_by}" if row and row.decided_by else ""
    return ApprovalAnswer(
        approval_id=approval_id,
        outcome="already_answered",
        decision={"allowed": "allow", "denied": "deny"}.get(status, status),
        note=f"It was already answered{by} ({status}); the first answer counts.",
    )
