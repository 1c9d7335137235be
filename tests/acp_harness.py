"""Drive the real hermes-acp process with the ACP SDK's client side, recording the transcript."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


async def until(predicate: Any, timeout: float = 20.0, what: str = "the expected state") -> Any:
    """Poll ``predicate()`` until it is truthy and return its value; fail naming ``what`` after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (found := predicate()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)
    return found


def processes_with(marker: str) -> list[str]:
    """The ids of this machine's processes whose command line holds ``marker`` (Linux /proc)."""

    def has(pid: str) -> bool:
        try:
            return marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    return [pid for pid in os.listdir("/proc") if pid.isdigit() and has(pid)]


def hermes_acp() -> str:
    path = BIN / "hermes-acp"
    assert path.exists(), f"{path} is missing: install the project (pip install -e .[test])"
    return str(path)


def schema_path() -> Path:
    """The ACP v1 JSON schema from the npm package, installed on first use."""
    path = ROOT / "node_modules/@agentclientprotocol/sdk/schema/v1/schema.json"
    if not path.exists():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=ROOT, check=True, capture_output=True)
    return path


class Client:
    """An editor stand-in: records updates, answers permissions, offers fs and terminals."""

    def __init__(self, *, answer: str | list[str] = "allow_once", fs: bool = True, terminal: bool = True) -> None:
        self.answers = [answer] if isinstance(answer, str) else list(answer)
        self.fs = fs
        self.terminal = terminal
        self.updates: list[Any] = []
        self.permission_requests: list[Any] = []
        self.buffers: dict[str, str] = {}  # unsaved editor buffers, by absolute path
        self.reads: list[str] = []
        self.writes: list[str] = []
        self.terminals: dict[str, dict] = {}
        self.released: list[str] = []
        self.permission_event = asyncio.Event()

    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(fs=FileSystemCapabilities(read_text_file=self.fs, write_text_file=self.fs), terminal=self.terminal)

    def on_connect(self, conn) -> None:
        self.conn = conn

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, options, session_id, tool_call, **_: Any):
        self.permission_requests.append(tool_call)
        self.permission_event.set()
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if answer == "wait":
            await asyncio.Event().wait()  # until the agent cancels the request
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        assert answer in {o.option_id for o in options}, options
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def read_text_file(self, path, session_id, line=None, limit=None, **_: Any):
        self.reads.append(path)
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        try:
            return ReadTextFileResponse(content=Path(path).read_text())
        except FileNotFoundError:
            raise acp.RequestError.resource_not_found(path) from None

    async def write_text_file(self, content, path, session_id, **_: Any):
        self.writes.append(path)
        Path(path).write_text(content)
        self.buffers.pop(path, None)
        return WriteTextFileResponse()

    async def create_terminal(self, command, session_id, args=None, env=None, cwd=None, output_byte_limit=None, **_: Any):
        proc = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        tid = f"term-{len(self.terminals) + 1}"
        self.terminals[tid] = {"proc": proc, "output": b"", "command": [command, *(args or [])], "killed": False}

        async def pump():
            while data := await proc.stdout.read(4096):
                self.terminals[tid]["output"] += data

        self.terminals[tid]["pump"] = asyncio.create_task(pump())
        return CreateTerminalResponse(terminal_id=tid)

    async def terminal_output(self, session_id, terminal_id, **_: Any):
        term = self.terminals[terminal_id]
        status = None
        if term["proc"].returncode is not None:
            await term["pump"]
            status = TerminalExitStatus(exit_code=term["proc"].returncode)
        return TerminalOutputResponse(output=term["output"].decode(), truncated=False, exit_status=status)

    async def wait_for_terminal_exit(self, session_id, terminal_id, **_: Any):
        term = self.terminals[terminal_id]
        code = await term["proc"].wait()
        await term["pump"]
        return WaitForTerminalExitResponse(exit_code=code)

    async def kill_terminal(self, session_id, terminal_id, **_: Any):
        term = self.terminals[terminal_id]
        term["killed"] = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(term["proc"].pid, 9)
        return KillTerminalResponse()

    async def release_terminal(self, session_id, terminal_id, **_: Any):
        self.released.append(terminal_id)
        return ReleaseTerminalResponse()

    # What the user saw, by kind -------------------------------------------------------
    def of_kind(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def text(self) -> str:
        return "".join(u.content.text for u in self.of_kind("agent_message_chunk"))

    def tool_updates(self, call_id: str | None = None) -> list[Any]:
        out = [u for u in self.updates if u.session_update in ("tool_call", "tool_call_update")]
        return [u for u in out if call_id is None or u.tool_call_id == call_id]


@dataclass
class Transcript:
    messages: list[tuple[str, dict]] = field(default_factory=list)  # (direction, message)

    def observe(self, event) -> None:
        # Direction from the client's side: outgoing = client -> agent.
        self.messages.append((event.direction.value, event.message))

    def from_agent(self) -> list[dict]:
        return [m for d, m in self.messages if d == "incoming"]


@contextlib.asynccontextmanager
async def running_agent(
    client: Client, env: dict[str, str], *, cwd: Path | None = None, stderr_path: Path | None = None, args: tuple[str, ...] = ()
):
    """Spawn ``hermes-acp ARGS``, initialize it; yields (conn, process, transcript)."""
    transcript = Transcript()
    stderr_path = stderr_path or Path(env["HERMES_EDITOR_HOME"]) / "stderr.log"
    with open(stderr_path, "ab") as stderr:
        async with acp.spawn_agent_process(
            client,
            hermes_acp(),
            *args,
            env=env,
            cwd=str(cwd) if cwd else None,
            transport_kwargs={"stderr": stderr.fileno()},
            observers=[transcript.observe],
        ) as (conn, process):
            init = await asyncio.wait_for(
                conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=client.capabilities()), 30
            )
            conn.init_response = init
            yield conn, process, transcript
    # Every session a test drives is checked against the published protocol schema.
    from tests.acp_schema import validate_transcript

    problems = validate_transcript(transcript.messages)
    assert not problems, "transcript does not match the ACP v1 schema:\n" + "\n".join(problems[:20])


def agent_env(home: Path, base_url: str | None, *, model: str = "openai:scripted", extra: dict | None = None) -> dict:
    env = {
        "HERMES_EDITOR_HOME": str(home),
        "HOME": str(home.parent / "user-home"),
        "PATH": os.environ["PATH"],
        "HERMES_QUIET": "1",
    }
    if base_url:
        env.update({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-test-not-a-real-key-123456", "HERMES_MODEL": model})
    env.update(extra or {})
    return env


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=str)
