"""``hermes-editor chat`` through its console script, against the scripted OpenAI-compatible server.

One-shot runs (``-p``) check the streamed reply, diffs, approvals answered on stdin, exit codes
and resuming; a run on a pseudo-terminal checks that Ctrl-C cancels a turn and the chat goes on.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import ScriptedOpenAIServer

BIN = Path(sys.executable).parent
API_KEY = "sk-test-chat-0123456789"


def configure(home: Path, base_url: str, extra: str = "") -> None:
    home.chmod(0o700)  # so that stderr holds only what chat says
    (home / "config.toml").write_text(
        f'model = "local:scripted"\n{extra}\n[retry]\nmax_attempts = 1\n\n'
        f'[providers.local]\nprofile = "openai-compatible"\nbase_url = "{base_url}"\napi_key = "{API_KEY}"\n'
    )


def chat(*args: str, input: str = "", cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "hermes-editor"), "chat", *args],
        input=input,
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_QUIET": "1", "NO_COLOR": "1"},
        cwd=cwd,
        timeout=120,
        start_new_session=True,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("A project.\n")
    return root


def user_texts(request: dict) -> list[str]:
    """The user messages' text in a chat-completions request."""
    texts = []
    for message in request.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        texts.append(content or "")
    return texts


def tool_results(request: dict) -> list[str]:
    out = []
    for message in request.get("messages", []):
        if message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
            out.append(content or "")
    return out


def session_id_of(stderr: str) -> str:
    match = re.search(r"^Session ([0-9a-f-]+)", stderr, re.MULTILINE)
    assert match, stderr
    return match.group(1)


WRITE = {"tool_calls": [{"id": "call_write", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hello, world\n"}}]}


# -- one-shot --------------------------------------------------------------------------------


def test_one_shot_prints_the_streamed_reply_and_exits_0(hermes_home, project):
    reply = "The project has one file, README.md, which says what it is."
    with ScriptedOpenAIServer([{"text": reply, "chunk_size": 7}]) as server:
        configure(hermes_home, server.base_url)
        result = chat("-p", "What is in this project?", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == reply
    assert "What is in this project?" in user_texts(server.requests[0])
    assert re.search(r"^Session [0-9a-f-]+ +\(continue it: hermes-editor chat --resume [0-9a-f]{8}\)$", result.stderr, re.MULTILINE)


def test_json_streams_the_reply_in_chunks_as_acp_updates(hermes_home, project):
    reply = "Streaming arrives in pieces, each its own update."
    with ScriptedOpenAIServer([{"text": reply, "chunk_size": 6}]) as server:
        configure(hermes_home, server.base_url)
        result = chat("--json", "-p", "Say something.", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    chunks = [e["update"]["content"]["text"] for e in events if e.get("update", {}).get("sessionUpdate") == "agent_message_chunk"]
    assert len(chunks) > 1
    assert "".join(chunks) == reply
    assert events[-1]["stopReason"] == "end_turn" and events[-1]["exitCode"] == 0


def test_prompt_from_stdin_with_a_dash(hermes_home, project):
    with ScriptedOpenAIServer([{"text": "Read it."}]) as server:
        configure(hermes_home, server.base_url)
        result = chat("-", input="a prompt that came on stdin\n", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Read it." in result.stdout
    assert any("a prompt that came on stdin" in text for text in user_texts(server.requests[0]))


def test_a_write_shows_its_diff_and_y_on_stdin_approves_it(hermes_home, project):
    with ScriptedOpenAIServer([WRITE, {"text": "I wrote hello.txt."}]) as server:
        configure(hermes_home, server.base_url)
        result = chat("-p", "Write hello.txt", input="y\n", cwd=project)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "Permission needed: Create hello.txt" in out
    assert "--- /dev/null" in out and "+++ b/hello.txt" in out and "+hello, world" in out
    assert "Allow? [y/N" in out and "→ approved (allow once)" in out
    assert "I wrote hello.txt." in out
    assert (project / "hello.txt").read_text() == "hello, world\n"


def test_n_on_stdin_rejects_the_write_and_the_model_is_told(hermes_home, project):
    with ScriptedOpenAIServer([WRITE, {"text": "Fine, I left it alone."}]) as server:
        configure(hermes_home, server.base_url)
        result = chat("-p", "Write hello.txt", input="n\n", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "→ rejected" in result.stdout
    assert not (project / "hello.txt").exists()
    told = tool_results(server.requests[1])
    assert told and "reject" in told[-1].lower(), told


def test_with_no_answer_on_stdin_the_question_is_denied_and_it_says_so(hermes_home, project):
    with ScriptedOpenAIServer([WRITE, {"text": "Not written."}]) as server:
        configure(hermes_home, server.base_url)
        result = subprocess.run(
            [str(BIN / "hermes-editor"), "chat", "-p", "Write hello.txt"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env={**os.environ, "HERMES_QUIET": "1", "NO_COLOR": "1"},
            cwd=project,
            timeout=120,
            start_new_session=True,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "denied: no answer could be read" in result.stdout
    assert "denied because stdin is not a terminal" in result.stderr
    assert not (project / "hello.txt").exists()
    assert "reject" in tool_results(server.requests[1])[-1].lower()


def test_accept_edits_mode_writes_without_asking_and_shows_the_diff(hermes_home, project):
    with ScriptedOpenAIServer([WRITE, {"text": "Done."}]) as server:
        configure(hermes_home, server.base_url)
        result = chat("--mode", "accept-edits", "-p", "Write hello.txt", cwd=project)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "Permission needed" not in out
    assert "✓ Write hello.txt" in out and "+hello, world" in out
    assert (project / "hello.txt").read_text() == "hello, world\n"


def test_model_picks_the_model_for_this_run(hermes_home, project):
    with ScriptedOpenAIServer([{"text": "ok"}]) as server:
        configure(hermes_home, server.base_url)
        result = chat("--model", "local:other-model", "-p", "hi", cwd=project)
        bad = chat("--model", "anthropic:claude-x", "-p", "hi", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.requests[0]["model"] == "other-model"
    assert bad.returncode == 2
    assert bad.stderr.startswith("--model anthropic:claude-x: ") and "'anthropic', which is not configured" in bad.stderr
    assert len(server.requests) == 1


# -- exit codes --------------------------------------------------------------------------------


def test_a_model_server_failing_with_500_exits_1_and_says_why_on_stderr(hermes_home, project):
    with ScriptedOpenAIServer(lambda body: {"error": 500}) as server:
        configure(hermes_home, server.base_url)
        result = chat("-p", "hi", cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Error:" in result.stderr
    assert "Error:" not in result.stdout


def test_an_unreachable_model_server_exits_1(hermes_home, project):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configure(hermes_home, f"http://127.0.0.1:{port}/v1")
    result = chat("-p", "hi", cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Error:" in result.stderr


def test_a_reply_cut_by_the_output_limit_exits_3(hermes_home, project):
    with ScriptedOpenAIServer([{"text": "This reply was cut", "finish_reason": "length"}]) as server:
        configure(hermes_home, server.base_url)
        result = chat("-p", "hi", cwd=project)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "stopped short (max_tokens)" in result.stderr


def test_sigint_cancels_a_one_shot_turn_and_exits_130(hermes_home, project):
    with ScriptedOpenAIServer([{"hang": True}]) as server:
        configure(hermes_home, server.base_url)
        proc = subprocess.Popen(
            [str(BIN / "hermes-editor"), "chat", "-p", "hi"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HERMES_QUIET": "1", "NO_COLOR": "1"},
            cwd=project,
            start_new_session=True,
        )
        try:
            server.wait_for(lambda: server.requests, timeout=60, what="the model request")
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, out + err
    assert "Cancelling the turn" in err and "Interrupted: the turn was cancelled." in err
    assert "Traceback" not in err


def test_a_prompt_hermes_acp_refuses_exits_1(hermes_home, project):
    with ScriptedOpenAIServer([]) as server:
        configure(hermes_home, server.base_url)
        result = chat("-p", "/model anthropic:nope", cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "hermes-acp refused:" in result.stderr and "anthropic" in result.stderr
    assert server.requests == []


def test_no_model_configured_exits_1_with_hermes_acps_reason(hermes_home, project):
    result = chat("-p", "hi", cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "hermes-acp refused" in result.stderr
    assert "setup" in result.stderr


def test_usage_errors_exit_2(hermes_home, project):
    empty = chat("-p", "   ", cwd=project)
    assert empty.returncode == 2 and "prompt is empty" in empty.stderr
    nowhere = chat("--project", str(project / "missing"), "-p", "hi", cwd=project)
    assert nowhere.returncode == 2 and "not a directory" in nowhere.stderr


# -- resuming ----------------------------------------------------------------------------------


def test_continue_and_resume_by_prefix_send_the_earlier_conversation(hermes_home, project, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    with ScriptedOpenAIServer(
        [{"text": "Noted: pineapple."}, {"text": "elsewhere"}, {"text": "It was pineapple."}, {"text": "Still pineapple."}]
    ) as server:
        configure(hermes_home, server.base_url)
        first = chat("-p", "Remember the word pineapple.", cwd=project)
        assert first.returncode == 0, first.stdout + first.stderr
        sid = session_id_of(first.stderr)
        # A later session in another project: --continue picks this project's latest.
        assert chat("-p", "unrelated", cwd=other).returncode == 0
        again = chat("--continue", "-p", "Which word?", cwd=project)
        assert again.returncode == 0, again.stdout + again.stderr
        assert session_id_of(again.stderr) == sid
        resumed = chat("--resume", sid[:8], "-p", "And now?", cwd=other)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert again.stdout.strip() == "It was pineapple."
    assert "Noted" not in again.stdout, "one-shot output carries this turn only"
    continued = server.requests[2]
    assert "Remember the word pineapple." in user_texts(continued) and user_texts(continued)[-1] == "Which word?"
    assert "unrelated" not in user_texts(continued)
    assert any(m.get("role") == "assistant" and "pineapple" in str(m.get("content")) for m in continued["messages"])
    texts = user_texts(server.requests[3])
    assert "Remember the word pineapple." in texts and "Which word?" in texts and texts[-1] == "And now?"
    assert "unrelated" not in texts


def test_resume_of_an_unknown_id_and_continue_without_a_session_fail_clearly(hermes_home, project):
    with ScriptedOpenAIServer([{"text": "ok"}]) as server:
        configure(hermes_home, server.base_url)
        assert chat("-p", "hi", cwd=project).returncode == 0
        unknown = chat("--resume", "ffffffff", "-p", "hi", cwd=project)
        nothing = chat("--continue", "-p", "hi", cwd=project.parent)
    assert unknown.returncode == 1 and "No session 'ffffffff'" in unknown.stderr
    assert nothing.returncode == 1 and "No earlier session in" in nothing.stderr


# -- interactive, on a pseudo-terminal -----------------------------------------------------------


class Terminal:
    """``hermes-editor chat`` with a pseudo-terminal as its controlling terminal."""

    def __init__(self, *args: str, cwd: Path) -> None:
        env = {**os.environ, "HERMES_QUIET": "1", "NO_COLOR": "1", "TERM": "dumb"}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child
            os.chdir(cwd)
            os.execve(str(BIN / "hermes-editor"), [str(BIN / "hermes-editor"), "chat", *args], env)
        self.seen = b""
        self.pos = 0  # where the next read_until starts looking

    def read_until(self, marker: str, limit: float = 90.0) -> str:
        """The output from the end of the last marker found up to and including ``marker``."""
        deadline = time.monotonic() + limit
        start = self.pos
        while (found := self.seen.find(marker.encode(), start)) < 0:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {marker!r} in: {self.seen.decode(errors='replace')}"
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    chunk = b""
                assert chunk, f"chat ended before {marker!r}: {self.seen.decode(errors='replace')}"
                self.seen += chunk
        self.pos = found + len(marker.encode())
        return self.seen[start : self.pos].decode(errors="replace")

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, limit: float = 60.0) -> int:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            with_status = os.waitpid(self.pid, os.WNOHANG)
            if with_status[0] == self.pid:
                return os.waitstatus_to_exitcode(with_status[1])
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.fd, 4096)
                except OSError:
                    pass
        raise AssertionError(f"chat did not exit: {self.seen.decode(errors='replace')}")

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


def test_on_a_terminal_ctrl_c_cancels_the_turn_and_the_chat_goes_on(hermes_home, project):
    script = [{"text": "Thinking about it", "chunk_size": 4, "delay": 0.2}, {"text": "After the cancel, still here."}]
    with ScriptedOpenAIServer(script) as server:
        configure(hermes_home, server.base_url)
        term = Terminal(cwd=project)
        try:
            term.read_until("Ctrl-D (or /exit) leaves")
            term.read_until("> ")
            term.send(b"Tell me a long story\r")
            term.read_until("Hermes: ")
            term.send(b"\x03")  # Ctrl-C, turned into SIGINT by the terminal
            out = term.read_until("(cancelled)")
            assert "Cancelling the turn" in out
            term.read_until("> ")
            term.send(b"/model anthropic:nope\r")  # refused by hermes-acp: the chat goes on
            term.read_until("hermes-acp refused:")
            term.read_until("> ")
            term.send(b"Are you there?\r")
            term.read_until("After the cancel, still here.")
            term.read_until("> ")
            term.send(b"\x04")  # Ctrl-D at the prompt
            status = term.wait()
        finally:
            term.close()
    assert status == 0, term.seen.decode(errors="replace")
    assert "Traceback" not in term.seen.decode(errors="replace")
    assert user_texts(server.requests[-1])[-1] == "Are you there?"


def test_on_a_terminal_an_approval_is_answered_and_ctrl_c_twice_at_the_prompt_exits(hermes_home, project):
    with ScriptedOpenAIServer([WRITE, {"text": "Written."}]) as server:
        configure(hermes_home, server.base_url)
        term = Terminal("Write hello.txt", cwd=project)
        try:
            out = term.read_until("Allow? [y/N")
            assert "+hello, world" in out
            term.send(b"y\r")
            term.read_until("Written.")
            term.read_until("> ")
            term.send(b"\x03")
            term.read_until("Ctrl-C again or Ctrl-D to exit")
            term.send(b"\x03")
            status = term.wait()
        finally:
            term.close()
    assert status == 0, term.seen.decode(errors="replace")
    assert (project / "hello.txt").read_text() == "hello, world\n"
    assert len(server.requests) == 2


def test_on_a_terminal_continue_shows_the_earlier_conversation_first(hermes_home, project):
    with ScriptedOpenAIServer([{"text": "Noted: pineapple."}, {"text": "Pineapple, as before."}]) as server:
        configure(hermes_home, server.base_url)
        assert chat("-p", "Remember the word pineapple.", cwd=project).returncode == 0
        term = Terminal("--continue", cwd=project)
        try:
            earlier = term.read_until("— continued —")
            assert "You: Remember the word pineapple." in earlier and "Hermes: Noted: pineapple." in earlier
            term.read_until("> ")
            term.send(b"Which word?\r")
            term.read_until("Pineapple, as before.")
            term.read_until("> ")
            term.send(b"/exit\r")
            status = term.wait()
        finally:
            term.close()
    assert status == 0, term.seen.decode(errors="replace")
    assert user_texts(server.requests[1]) == ["Remember the word pineapple.", "Which word?"]
