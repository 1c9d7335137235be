"""Following a task inside one tool call: progress notices, and approvals asked by elicitation.

A call (``ask``, ``task_wait``) follows its task until it finishes, its time is up, or it
needs an approval. When the client can show a form, the approval is asked right there:

- in the handshake era (2025-11-25 and before) with an ``elicitation/create`` request sent
  during the call;
- in the 2026-07-28 era the call returns ``input_required`` with the question; the client
  asks the user and repeats the call with the answer and our ``request_state`` (sealed by
  the SDK), and the call goes on following the same task.

The questions come up while the call runs, after the tool body has started, which is why
this is done in the body rather than with SDK resolvers (they run before the body, and on
every round, which would start an ``ask`` twice). A client without elicitation sees status
``needs_approval``, and the user answers elsewhere: in an editor, on the phone, or with
``hermes-editor approvals`` (``approval_respond`` only with ``--trust-client-approvals``).
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from hermes_mcp.approvals import elicitation_message, elicitation_schema

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

    from hermes_mcp.runtime import Runtime
    from hermes_mcp.tasks import Task

__all__ = ["MAX_WAIT", "follow", "resumed_task_id"]

log = logging.getLogger(__name__)

# Claude Desktop ends a tool call at about 60 s (progress does not extend it).
MAX_WAIT = 50.0
# Less than this left in the call: report needs_approval now and ask at the start of the next.
MIN_ELICIT_SECONDS = 15.0
PROGRESS_INTERVAL = 0.25
_ANSWER_KEY = "approval"


def can_elicit(ctx: Context) -> bool:
    """Whether the client declared form elicitation (a bare ``elicitation: {}`` counts)."""
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _modern(ctx: Context) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def resumed_task_id(ctx: Context) -> str | None:
    """On a repeated call (2026-07-28 ``input_required`` round), the task it follows."""
    state = _state(ctx)
    return state.get("task") if state else None


def _state(ctx: Context) -> dict[str, Any] | None:
    raw = ctx.request_state
    if not raw:
        return None
    try:
        state = json.loads(raw)
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


async def follow(ctx: Context, runtime: Runtime, task: Task, wait: float) -> Any:
    """Follow ``task`` for up to ``wait`` seconds; returns the task's view or an InputRequiredResult."""
    import anyio

    deadline = time.monotonic() + min(max(wait, 0.0), MAX_WAIT)
    asked: set[str] = set()
    elicit = can_elicit(ctx)
    await _apply_round_answer(ctx, runtime, task, asked)
    runtime.sampling.apply_round(ctx, task)
    reported = -1
    last_report = 0.0
    while True:
        now = time.monotonic()
        if task.version != reported and now - last_report >= PROGRESS_INTERVAL:
            reported, last_report = task.version, now
            await _progress(ctx, task)
        if task.finished:
            break
        left = deadline - time.monotonic()
        # A model step for the client's model (MCP sampling, when no model is configured).
        sampled = await runtime.sampling.serve(ctx, task, left)
        if sampled is True:
            continue
        if sampled is not None:
            return sampled
        waiting = task.open_approvals()
        if waiting:
            fresh = [r for r in waiting if r.id not in asked]
            if not (fresh and elicit) or (asked and left < MIN_ELICIT_SECONDS):
                if await _answered_elsewhere(runtime):
                    continue
                break  # the user has to answer: say so now rather than wait out the call
            request = fresh[0]
            if _modern(ctx):
                return _input_required(task, request)
            asked.add(request.id)
            with anyio.move_on_after(max(left, MIN_ELICIT_SECONDS)):
                if await _elicit_now(ctx, runtime, task, request) is None:
                    elicit = False  # the client refused elicitation itself: the user answers elsewhere
            continue
        if left <= 0:
            break
        # Wake on the next change; while a progress notice is held back, no later than it is due.
        due = PROGRESS_INTERVAL - (time.monotonic() - last_report) if task.version != reported else 5.0
        await task.wait_change(min(left, max(due, 0.01)))
    if task.version != reported:
        await _progress(ctx, task)
    return task.view()


async def _answered_elsewhere(runtime: Runtime) -> bool:
    """Pick up answers given in an editor or the gateway now, not at the watcher's next poll."""
    from surface_support.approval_watch import settle_foreign_answers

    agent = runtime.agent_if_built
    if agent is None:
        return False
    try:
        return await settle_foreign_answers(agent.broker, await runtime.store()) > 0
    except Exception:
        log.debug("could not check the store for answers", exc_info=True)
        return False


async def _progress(ctx: Context, task: Task) -> None:
    try:
        await ctx.report_progress(task.version, None, task.headline())
    except Exception:  # progress is advisory; a closed stream must not fail the call
        log.debug("progress notice failed", exc_info=True)


def _input_required(task: Task, request: Any) -> Any:
    from mcp.server.elicitation import render_elicitation_schema
    from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

    schema = render_elicitation_schema(elicitation_schema(request))
    question = ElicitRequest(params=ElicitRequestFormParams(message=elicitation_message(request, task.session), requested_schema=schema))
    state = json.dumps({"task": task.id, "approval": request.id})
    return InputRequiredResult(input_requests={_ANSWER_KEY: question}, request_state=state)


async def _apply_round_answer(ctx: Context, runtime: Runtime, task: Task, asked: set[str]) -> None:
    """A repeated call carries the user's answer to the question the last round asked."""
    state = _state(ctx)
    responses = ctx.input_responses
    if not state or state.get("task") != task.id or not responses:
        return
    approval_id = state.get("approval")
    answer = responses.get(_ANSWER_KEY) if hasattr(responses, "get") else None
    if not isinstance(approval_id, str) or answer is None:
        return
    asked.add(approval_id)
    request = next((r for r in task.open_approvals() if r.id == approval_id), None)
    if request is None:
        return  # answered elsewhere meanwhile
    action = getattr(answer, "action", None)
    content = getattr(answer, "content", None) or {}
    await _apply(runtime, request, action, content.get("decision"))


async def _elicit_now(ctx: Context, runtime: Runtime, task: Task, request: Any) -> bool | None:
    """Ask during the call (handshake era). None when the client cannot elicit after all."""
    from mcp.shared.exceptions import MCPError

    try:
        result = await ctx.elicit(elicitation_message(request, task.session), elicitation_schema(request))
    except MCPError as exc:
        log.info("elicitation refused by the client (%s); the user answers elsewhere", exc)
        return None
    except ValueError:
        return False  # accepted with content that does not fit: ask again next call
    decision = getattr(getattr(result, "data", None), "decision", None)
    return await _apply(runtime, request, result.action, decision)


async def _apply(runtime: Runtime, request: Any, action: str | None, decision: Any) -> bool:
    """Give the broker the user's answer; a dismissed form leaves the question open."""
    from core.events import Decision

    agent = runtime.agent_if_built
    if agent is None:
        return False
    if action == "accept" and decision in ("allow", "allow_always", "deny", "deny_always"):
        core = {
            "allow": Decision.ALLOW_ONCE,
            "allow_always": Decision.ALLOW_ALWAYS,
            "deny": Decision.REJECT_ONCE,
            "deny_always": Decision.REJECT_ALWAYS,
        }[decision]
        await agent.broker.answer(request.id, core, by="mcp-elicitation")
        return True
    if action == "decline":
        await agent.broker.answer(request.id, Decision.REJECT_ONCE, by="mcp-elicitation")
        return True
    return False
