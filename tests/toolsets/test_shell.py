"""run_command on the local host: output caps, exit codes and signals, cancel, background commands."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from core.events import Decision
from core.host.local import LocalHost
from core.host.processes import OutputCapture
from tests.toolsets.helpers import Session


@pytest.fixture
def root(tmp_path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project.resolve()


def test_capture_keeps_head_and_tail():
    capture = OutputCapture(10)
    for chunk in (b"0123", b"4567", b"89ab", b"cdef"):
        capture.add(chunk)
    assert capture.omitted == 6 and capture.text() == "01234\n[... 6 bytes of output omitted ...]\nbcdef"
    small = OutputCapture(100)
    small.add(b"short")
    assert small.omitted == 0 and small.text() == "short"


async def test_long_output_keeps_head_and_tail(root):
    run = await Session(root).run("run_command", {"command": "seq 1 20000"})
    text = run.result.content
    assert not run.failed and text.startswith("exit code 0\n1\n2\n3\n")
    assert text.rstrip().endswith("19999\n20000") and "bytes of output omitted" in text
    assert len(text) < 31_000


async def test_exit_codes_signals_and_timeouts(root):
    session = Session(root)
    failing = await session.run("run_command", {"command": "echo nope >&2; exit 3"})
    assert failing.failed and failing.result.content == "exit code 3\nnope"
    killed = await session.run("run_command", {"command": "kill -TERM $$"}, answer=Decision.ALLOW_ONCE)
    assert killed.failed and killed.result.content.startswith("killed by SIGTERM")
    slow = await session.run("run_command", {"command": "sleep 30", "timeout": 0.3})
    assert slow.failed and slow.result.content.startswith("timed out after 0.3s"), "stopped, not waited for"


async def test_cancel_kills_the_whole_process_tree(root):
    marker = root / "child.pid"
    host = LocalHost()
    task = asyncio.create_task(
        host.run_command(f"sh -c 'echo $$ > {marker}; sleep 60' & sleep 60", root, timeout=60, output_limit=1000, show=_ignore)
    )
    while not marker.exists() or not marker.read_text().strip():
        await asyncio.sleep(0.02)
    child = int(marker.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if not _alive(child):
            break
        await asyncio.sleep(0.02)
    assert not _alive(child), "the grandchild was killed with its group"


async def test_commands_never_see_our_keys(root, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak-0000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-not-leak")
    monkeypatch.setenv("SOME_CONFIG_VALUE", "config-secret-value")
    run = await Session(root, host=LocalHost(secrets=["config-secret-value"])).run("run_command", {"command": "env"})
    assert "should-not-leak" not in run.result.content and "config-secret-value" not in run.result.content
    assert "PATH=" in run.result.content


async def test_background_command_runs_on_and_can_be_read_and_stopped(root):
    session = Session(root, mode="ask")
    run = await session.run(
        "run_command",
        {"command": "echo ready; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.1; done", "background": True},
        answer=Decision.ALLOW_ONCE,
    )
    assert not run.failed, "returns while the command runs (it never ends by itself)"
    job = run.result.content.split("job ")[1].split(".")[0]
    first = await session.run("command_output", {"job": job, "wait": 2})
    assert first.result.content.startswith("running\nready")
    second = await session.run("command_output", {"job": job, "wait": 5})
    assert "ready" not in second.result.content and "tick" in second.result.content, "only new output"
    stopped = await session.run("stop_command", {"job": job})
    assert not stopped.failed and stopped.result.content.startswith("stopped (killed by SIGTERM)")
    gone = await session.run("command_output", {"job": job})
    assert gone.failed and "No background command" in gone.result.content


async def test_a_background_command_that_ends_reports_its_exit(root):
    session = Session(root)
    run = await session.run("run_command", {"command": "echo done; exit 4", "background": True})
    job = run.result.content.split("job ")[1].split(".")[0]
    output = await session.run("command_output", {"job": job, "wait": 5})
    for _ in range(50):
        if output.result.content.startswith("ended"):
            break
        output = await session.run("command_output", {"job": job, "wait": 0.2})
    assert output.result.content.startswith("ended, exit code 4")
    assert job not in session.host.jobs


async def test_host_close_stops_background_commands(root):
    host = LocalHost()
    job = await host.start_command("sleep 60", root, output_limit=1000, show=_ignore)
    pid = job._proc.pid
    await host.aclose()
    assert not _alive(pid) and host.jobs == {}


async def test_dangerous_commands_ask_even_in_auto_and_never_offer_always(root):
    (root / "build").mkdir()
    session = Session(root, mode="auto")
    run = await session.run("run_command", {"command": "rm -rf build"}, answer=Decision.REJECT_ONCE)
    assert run.failed and "declined" in run.result.content
    request = session.answered
    assert not request.offer_always and "recursive" in request.reason and request.command == "rm -rf build"
    assert (root / "build").exists()
    refused = await session.run("run_command", {"command": "rm -rf ~"})
    assert refused.failed and "never run" in refused.result.content and not session.requests()


async def test_allow_always_is_remembered_for_the_program(root):
    session = Session(root, mode="ask")
    remembered: list = []

    async def remember(tool, pattern, decision):
        remembered.append((tool, pattern, decision))

    original = session.ctx

    def ctx():
        context = original()
        context.remember_rule = remember
        return context

    session.ctx = ctx
    first = await session.run("run_command", {"command": "echo one > out.txt"}, answer=Decision.ALLOW_ALWAYS)
    assert not first.failed and remembered == [("run_command", "echo", "allow")]
    second = await session.run("run_command", {"command": "echo two > out.txt"})
    assert not second.failed and (root / "out.txt").read_text() == "two\n"


async def _ignore(_content) -> None:
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is as good as gone
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return True
