"""The client's model, when no model is configured: MCP sampling (``sampling/createMessage``).

A user whose MCP client offers sampling (its ``sampling`` capability) needs no API key: with
no model in ``config.toml``, the agent's model steps go to the client, which answers with its
own model (and usually asks the user first). Each step of a task is carried by a call of the
client that follows the task (``ask``, ``task_wait``), as approvals are:

- in the handshake era (2025-11-25 and before) as a ``sampling/createMessage`` request sent
  during the call;
- in the 2026-07-28 era the call returns ``input_required`` with the request; the client
  samples and repeats the call with the answer, and the call goes on following the task.

A step still unanswered when a call ends waits for the next ``task_wait``. When the client
declares ``sampling.tools`` the agent's tools travel with each request and the model's tool
calls run as usual; without it the agent answers without tools, and the task says so. Every
task the client's model answers says which model that was (``notices``); the session's record
names it too. With no model configured and no sampling, starting a task fails as before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.messages import AssistantMessage, ImagePart, TextPart, ToolCallPart, ToolResultMessage, Usage, UserMessage
from core.models.base import ErrorKind, ModelError, ModelEvent, ModelRequest, ResponseDone, TextChunk, ToolCallChunk
from hermes_mcp.backend import NotReady
from hermes_mcp.tasks import TaskManager

if TYPE_CHECKING:
    from pathlib import Path

    from mcp.server.mcpserver import Context
    from mcp_types import CreateMessageRequestParams

    from core.config import Config
    from hermes_mcp.backend import Backend
    from hermes_mcp.tasks import Task

__all__ = [
    "CLIENT_MODEL",
    "ClientModel",
    "ClientSampling",
    "SamplingError",
    "SamplingTasks",
    "offers_sampling",
    "remember_request",
    "request_params",
    "response_events",
]

log = logging.getLogger(__name__)

# The agent's model name when the client's model answers; steps are labelled "mcp-client:<model>".
CLIENT_MODEL = "mcp-client"
# Time a handshake-era call gives a step it sends, even when less of its own time is left.
MIN_SAMPLE_SECONDS = 15.0
# Sampling rounds in one 2026-07-28 call; the SDKs' clients stop a call after 10 rounds of any kind.
MAX_ROUNDS = 6
_KEY = "sample:"
_NO_TOOLS_NOTE = (
    "No tools are available in this conversation: the client's model answers through MCP sampling, and this "
    "client does not offer tools there. Answer from the conversation alone; say what you would do and which "
    "files or commands it needs rather than claiming to have done it."
)
_FINISH = {"endTurn": "stop", "stopSequence": "stop", "maxTokens": "length", "toolUse": "tool_calls"}

# The session of the request being handled (set by ``remember_request``): whose capabilities decide.
_request_session: ContextVar[Any] = ContextVar("hermes_mcp_request_session", default=None)
# The task's channel, inherited by the task's turn (and its subagents) from the call that started it.
_channel: ContextVar[Channel | None] = ContextVar("hermes_mcp_sampling_channel", default=None)


async def remember_request(ctx: Any, call_next: Any) -> Any:
    """Server middleware: the request's session, for code that has no ``Context`` (tasks.start)."""
    token = _request_session.set(getattr(ctx, "session", None))
    try:
        return await call_next(ctx)
    finally:
        _request_session.reset(token)


def _modern(session: Any) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return getattr(session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def offers_sampling(session: Any) -> bool:
    """Whether this client can answer sampling requests: it declared ``sampling``, and in the
    handshake era this request has a channel back to it."""
    caps = getattr(session, "client_capabilities", None)
    if caps is None or caps.sampling is None:
        return False
    return _modern(session) or bool(getattr(session, "can_send_request", False))


def offers_sampling_tools(session: Any) -> bool:
    caps = getattr(session, "client_capabilities", None)
    return caps is not None and caps.sampling is not None and caps.sampling.tools is not None


class SamplingError(ModelError):
    """The client's model did not answer a step: refused, unanswered, or unreadable."""

    def user_message(self) -> str:
        return self.message


# --- requests and answers ---------------------------------------------------------------


def request_params(request: ModelRequest, *, tools: bool) -> CreateMessageRequestParams:
    """One model step as ``sampling/createMessage`` params: the history as sampling messages,
    tool calls and results as ``tool_use``/``tool_result`` blocks (or as text without tools)."""
    from mcp.server.validation import validate_tool_use_result_messages
    from mcp_types import CreateMessageRequestParams, ModelPreferences, Tool

    with_tools = tools and bool(request.tools)
    messages = _sampling_messages(request, tools=with_tools)
    validate_tool_use_result_messages(messages)
    system = request.system if with_tools or not request.tools else f"{request.system}\n\n{_NO_TOOLS_NOTE}".strip()
    return CreateMessageRequestParams(
        messages=messages,
        system_prompt=system or None,
        max_tokens=request.max_tokens,
        # A coding agent: the client's most capable model, if it lets us say so.
        model_preferences=ModelPreferences(intelligence_priority=0.9, speed_priority=0.3, cost_priority=0.3),
        tools=[Tool(name=t.name, description=t.description, input_schema=t.parameters) for t in request.tools] if with_tools else None,
    )


def _sampling_messages(request: ModelRequest, *, tools: bool) -> list[Any]:
    from mcp_types import ImageContent, SamplingMessage, TextContent, ToolResultContent, ToolUseContent

    out: list[tuple[str, list[Any]]] = []

    def add(role: str, blocks: list[Any]) -> None:
        if not blocks:
            return
        results = blocks[0].type == "tool_result"
        last = out[-1] if out else None
        # Same-role neighbours join, except that tool results travel alone (the spec's rule).
        if last is not None and last[0] == role and (last[1][0].type == "tool_result") == results:
            last[1].extend(blocks)
        else:
            out.append((role, list(blocks)))

    for message in request.messages:
        if isinstance(message, UserMessage):
            add(
                "user",
                [
                    ImageContent(data=p.data, mime_type=p.media_type) if isinstance(p, ImagePart) else TextContent(text=p.text)
                    for p in message.parts
                    if isinstance(p, ImagePart) or p.text
                ],
            )
        elif isinstance(message, AssistantMessage):
            blocks: list[Any] = [TextContent(text=message.text)] if message.text else []
            for call in message.tool_calls:
                if tools:
                    blocks.append(ToolUseContent(id=call.id, name=call.name, input=call.arguments))
                else:
                    blocks.append(TextContent(text=f"[called the tool {call.name} with {json.dumps(call.arguments, ensure_ascii=False)}]"))
            add("assistant", blocks)
        elif isinstance(message, ToolResultMessage):
            if tools:
                add(
                    "user",
                    [
                        ToolResultContent(
                            tool_use_id=message.tool_call_id,
                            content=[TextContent(text=message.content)],
                            is_error=True if message.is_error else None,
                        )
                    ],
                )
            else:
                failed = " (failed)" if message.is_error else ""
                add("user", [TextContent(text=f"[result of the tool {message.tool_name}{failed}]\n{message.content}")])
    if request.ephemeral:
        # Request-only text goes last, set apart from the user's words (after tool results, alone).
        add("user", [TextContent(text=request.ephemeral)])
    if out and out[0][0] != "user":
        out.insert(0, ("user", [TextContent(text="(conversation continues)")]))
    return [SamplingMessage(role=role, content=blocks[0] if len(blocks) == 1 else blocks) for role, blocks in out]  # type: ignore[arg-type]


def model_label(model: str) -> str:
    return f"{CLIENT_MODEL}:{model}" if model else CLIENT_MODEL


def response_events(result: Any) -> list[ModelEvent]:
    """The client's answer (``CreateMessageResult`` or ``...WithTools``) as one step's model events."""
    content = result.content if isinstance(result.content, list) else [result.content]
    label = model_label(str(getattr(result, "model", "") or ""))
    parts: list[TextPart | ToolCallPart] = []
    events: list[ModelEvent] = []
    for index, block in enumerate(content):
        kind = getattr(block, "type", None)
        if kind == "text" and block.text:
            parts.append(TextPart(text=block.text))
            events.append(TextChunk(block.text))
        elif kind == "tool_use":
            call_id = block.id or f"call_{index}"
            arguments = block.input if isinstance(block.input, dict) else {}
            invalid = None if isinstance(block.input, dict) else json.dumps(block.input)
            parts.append(ToolCallPart(id=call_id, name=block.name, arguments=arguments, invalid_arguments=invalid))
            events.append(ToolCallChunk(call_id, block.name))
        elif kind in ("image", "audio"):
            note = f"[the client's model answered with {'an image' if kind == 'image' else 'audio'}, which is not shown here]"
            parts.append(TextPart(text=note))
            events.append(TextChunk(note))
    calls = any(isinstance(p, ToolCallPart) for p in parts)
    reason = "tool_calls" if calls else _FINISH.get(str(getattr(result, "stop_reason", None) or "endTurn"), "stop")
    if reason == "tool_calls" and not calls:
        reason = "stop"
    events.append(ResponseDone(message=AssistantMessage(parts=list(parts), model=label), finish_reason=reason, usage=Usage()))
    return events


# --- the model and its steps ------------------------------------------------------------


@dataclass(eq=False)
class Step:
    """One model request waiting for the client's answer."""

    params: CreateMessageRequestParams
    tools: bool
    future: asyncio.Future[Any]
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # Requests that could not carry it (no channel back to the client): not tried again.
    refused_by: set[str] = field(default_factory=set)

    def answer(self, result: Any) -> None:
        if not self.future.done():
            self.future.set_result(result)

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)


class Channel:
    """The model steps of one task, waiting for a call of its client to carry them."""

    def __init__(self, *, tools: bool) -> None:
        self.tools = tools
        self.steps: OrderedDict[str, Step] = OrderedDict()
        self.task: Task | None = None
        self.on_answer: Callable[[str], Any] | None = None

    def post(self, params: CreateMessageRequestParams) -> Step:
        step = Step(params=params, tools=self.tools and params.tools is not None, future=asyncio.get_running_loop().create_future())
        self.steps[step.id] = step
        self._wake()
        return step

    def drop(self, step: Step) -> None:
        self.steps.pop(step.id, None)
        if not step.future.done():
            step.future.cancel()

    def _wake(self) -> None:
        if self.task is not None:
            self.task.touch()

    def note(self, text: str) -> None:
        """A notice in the task's result (once)."""
        if self.task is not None and text not in self.task.notices:
            self.task.notices = (self.task.notices + [text])[-10:]
            self.task.touch()


class ClientModel:
    """The agent's model when none is configured: each step goes to the task's client."""

    name = CLIENT_MODEL
    family: str | None = None  # unknown: the client chooses its model per request

    def __init__(self, timeout: Callable[[], float]) -> None:
        self._timeout = timeout

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        channel = _channel.get()
        if channel is None:
            raise SamplingError(
                ErrorKind.BAD_REQUEST,
                "No model is configured, and the client's model (MCP sampling) answers only the tasks a client starts. "
                "Run 'hermes-editor setup' to configure a model.",
                model=CLIENT_MODEL,
            )
        step = channel.post(request_params(request, tools=channel.tools))
        timeout = self._timeout()
        try:
            result = await asyncio.wait_for(step.future, timeout)
        except TimeoutError:
            raise SamplingError(
                ErrorKind.TIMEOUT,
                f"The client's model (MCP sampling) did not answer within {timeout:.0f} s. Each step is asked while ask or "
                "task_wait follows the task: call task_wait to go on, or configure a model with 'hermes-editor setup'.",
                model=CLIENT_MODEL,
            ) from None
        finally:
            channel.drop(step)
        events = response_events(result)
        done = events[-1]
        assert isinstance(done, ResponseDone)
        label = done.message.model or CLIENT_MODEL
        if channel.on_answer is not None:
            await channel.on_answer(label)
        for event in events:
            yield event

    async def aclose(self) -> None:
        return None


class ClientSampling:
    """The client's model for one ``hermes-mcp`` process, and the channel of each task it answers."""

    MAX_CHANNELS = 200

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.model = ClientModel(lambda: backend.approval_timeout)
        self._channels: OrderedDict[str, Channel] = OrderedDict()

    # -- choosing the model ----------------------------------------------------------------

    def stand_in(self, config: Config | None) -> ClientModel | None:
        """The client's model when no model is configured (a broken configuration is not
        replaced) and the client of this request offers sampling; None otherwise."""
        if self._backend.config_error or config is None or config.model:
            return None
        return self.model if offers_sampling(_request_session.get()) else None

    def answers(self) -> bool:
        agent = self._backend.agent_if_built
        return agent is not None and agent.model is self.model

    def check_client(self) -> None:
        """Refuse a task when the agent answers with the client's model and this client has none to offer."""
        if self.answers() and not offers_sampling(_request_session.get()):
            raise NotReady(
                "No model is configured: this hermes-mcp answers with its client's model (MCP sampling), and this client "
                "does not offer sampling. Run 'hermes-editor setup' in a terminal (or set model in config.toml), then "
                "restart hermes-mcp."
            )

    def new_channel(self) -> Channel:
        return Channel(tools=offers_sampling_tools(_request_session.get()))

    def bind(self, channel: Channel, task: Task) -> None:
        channel.task = task
        store_getter = self._backend.store
        seen: set[str] = set()

        async def on_answer(label: str) -> None:
            model = label.partition(":")[2] or "(unnamed)"
            channel.note(f"Answered by the client's model {model} (MCP sampling), as no model is configured for hermes-editor.")
            if label not in seen:
                seen.add(label)
                try:
                    await (await store_getter()).update_session(task.session.id, model=label)
                except Exception:
                    log.debug("could not record the session's model", exc_info=True)

        channel.on_answer = on_answer
        if not channel.tools:
            channel.note(
                "This client offers sampling without tools, so its model answers without the agent's tools (no files "
                "read or changed, no commands). Configure a model ('hermes-editor setup') for the whole agent."
            )
        self._channels[task.id] = channel
        if channel.steps:
            task.touch()
        while len(self._channels) > self.MAX_CHANNELS:
            oldest = next((tid for tid, c in self._channels.items() if c.task is not None and c.task.finished), None)
            if oldest is None:
                break
            del self._channels[oldest]

    # -- carrying steps within a call --------------------------------------------------------

    def waiting(self, task: Task) -> bool:
        """Whether a model step of ``task`` waits for a call of its client to carry it."""
        channel = self._channels.get(task.id)
        return channel is not None and any(not s.future.done() for s in channel.steps.values())

    def _waiting(self, ctx: Context, task: Task) -> list[Step]:
        channel = self._channels.get(task.id)
        if channel is None or not channel.steps:
            return []
        session = ctx.session
        if not offers_sampling(session):
            return []
        tools = offers_sampling_tools(session)
        return [s for s in channel.steps.values() if not s.future.done() and (tools or not s.tools) and ctx.request_id not in s.refused_by]

    async def serve(self, ctx: Context, task: Task, left: float) -> Any:
        """Carry the task's waiting model steps in this call. None: none to carry (or no time
        left); True: carried, look again; else the ``input_required`` result to return."""
        steps = self._waiting(ctx, task)
        if not steps:
            return None
        if _modern(ctx.session):
            rounds = _rounds(ctx)
            if rounds >= MAX_ROUNDS:
                # Clients give up on a call after about ten rounds: end this one, task_wait goes on.
                return task.view()
            return _input_required(task, steps, rounds + 1)
        if left <= 0:
            return None
        import anyio

        with anyio.move_on_after(max(left, MIN_SAMPLE_SECONDS)):
            await self._send(ctx, steps[0])
        return True

    async def _send(self, ctx: Context, step: Step) -> None:
        """One ``sampling/createMessage`` during the call (handshake era)."""
        from mcp.shared.exceptions import MCPError, NoBackChannelError
        from mcp.shared.message import ServerMessageMetadata
        from mcp_types import CreateMessageRequest, CreateMessageResult, CreateMessageResultWithTools
        from pydantic import ValidationError

        result_type: Any = CreateMessageResultWithTools if step.tools else CreateMessageResult
        try:
            result = await ctx.session.send_request(
                CreateMessageRequest(params=step.params), result_type, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
            )
        except NoBackChannelError:
            step.refused_by.add(ctx.request_id)
            log.info("no channel back to the client for sampling in this call")
            return
        except MCPError as exc:
            step.fail(_refused(str(exc)))
            return
        except ValidationError as exc:
            step.fail(
                SamplingError(
                    ErrorKind.BAD_RESPONSE,
                    f"The client's model sent an answer that could not be read ({exc.error_count()} problems).",
                    model=CLIENT_MODEL,
                )
            )
            return
        step.answer(result)

    def apply_round(self, ctx: Context, task: Task) -> None:
        """A repeated call (2026-07-28) carries the client's answers to the steps the last round asked."""
        responses = ctx.input_responses
        channel = self._channels.get(task.id)
        if not responses or channel is None:
            return
        for key, answer in responses.items():
            if not key.startswith(_KEY):
                continue
            step = channel.steps.get(key[len(_KEY) :])
            if step is None:
                continue  # cancelled or timed out meanwhile
            if not hasattr(answer, "model") or not hasattr(answer, "content"):
                step.fail(
                    SamplingError(ErrorKind.BAD_RESPONSE, "The client answered a sampling request with something else.", model=CLIENT_MODEL)
                )
            else:
                step.answer(answer)


def _refused(why: str) -> SamplingError:
    return SamplingError(
        ErrorKind.BAD_REQUEST,
        f"The client's model (MCP sampling) did not answer: {why}. Allow this server to use the client's model in the "
        "client, or configure a model with 'hermes-editor setup'.",
        model=CLIENT_MODEL,
    )


def _rounds(ctx: Context) -> int:
    """Sampling rounds this call has had so far (2026-07-28), from the state the last one carried."""
    try:
        state = json.loads(ctx.request_state or "{}")
    except ValueError:
        return 0
    rounds = state.get("rounds") if isinstance(state, dict) else None
    return rounds if isinstance(rounds, int) else 0


def _input_required(task: Task, steps: list[Step], rounds: int) -> Any:
    from mcp_types import CreateMessageRequest, InputRequiredResult

    state = json.dumps({"task": task.id, "sampling": [s.id for s in steps], "rounds": rounds})
    return InputRequiredResult(input_requests={f"{_KEY}{s.id}": CreateMessageRequest(params=s.params) for s in steps}, request_state=state)


class SamplingTasks(TaskManager):
    """Tasks whose turns find their client's channel: the one of the call that started them."""

    def __init__(self, backend: Backend, sampling: ClientSampling, **options: Any) -> None:
        super().__init__(backend, **options)
        self._sampling = sampling

    async def start(self, prompt: str, *, cwd: str | None, session_id: str | None, mode: str, allowed: list[Path]) -> Task:
        self._sampling.check_client()
        channel = self._sampling.new_channel()
        # The runner (and the turn inside it) copies this context when the task is created.
        token = _channel.set(channel)
        try:
            task = await super().start(prompt, cwd=cwd, session_id=session_id, mode=mode, allowed=allowed)
        finally:
            _channel.reset(token)
        if self._sampling.answers():
            self._sampling.bind(channel, task)
        return task
