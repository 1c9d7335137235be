"""The editor toolset on the local host, through the one dispatch path."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.events import Decision, PermissionNeeded
from core.host.local import LocalHost
from core.messages import ToolCallPart
from core.policy.approvals import ApprovalBroker, ApprovalPolicy
from core.tools.context import ToolContext
from core.tools.dispatch import run_tool
from toolsets import toolset

TOOLS = {t.name: t for t in toolset("editor")}


def _ctx(root: Path, mode: str = "auto", events: list | None = None, broker: ApprovalBroker | None = None) -> ToolContext:
    sink = events if events is not None else []

    async def emit(event):
        sink.append(event)

    return ToolContext(
        session_id="s",
        cwd=root,
        roots=[root.resolve()],
        host=LocalHost(),
        policy=ApprovalPolicy(mode=mode, roots=[root.resolve()]),
        broker=broker or ApprovalBroker(None, timeout=5),
        emit=emit,
    )


async def _run(root: Path, name: str, args: dict, **kw):
    return await run_tool(TOOLS, ToolCallPart(id="c", name=name, arguments=args), _ctx(root, **kw))


@pytest.fixture
def root(tmp_path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("".join(f"line {i}\n" for i in range(1, 51)))
    (tmp_path / "dup.txt").write_text("x = 1\ny = 2\nx = 1\n")
    return tmp_path


async def test_read_file_numbers_lines_and_marks_truncation(root):
    run = await _run(root, "read_file", {"path": "src/app.py", "offset": 10, "limit": 5})
    assert not run.failed
    lines = run.result.content.splitlines()
    assert lines[0] == "    10\tline 10" and lines[4] == "    14\tline 14"
    assert "showing lines 10-14 of 50" in lines[-1] and "offset=15" in lines[-1]


async def test_read_file_errors_are_clear(root):
    (root / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    missing = await _run(root, "read_file", {"path": "nope.py"})
    assert missing.failed and "does not exist" in missing.result.content
    binary = await _run(root, "read_file", {"path": "blob.bin"})
    assert binary.failed and "binary" in binary.result.content
    past = await _run(root, "read_file", {"path": "src/app.py", "offset": 99})
    assert past.failed and "50 lines" in past.result.content


async def test_edit_file_exact_once_or_says_where(root):
    ambiguous = await _run(root, "edit_file", {"path": "dup.txt", "old_string": "x = 1", "new_string": "x = 3"})
    assert ambiguous.failed and "matches 2 times" in ambiguous.result.content and "lines 1, 3" in ambiguous.result.content
    missing = await _run(root, "edit_file", {"path": "dup.txt", "old_string": "z = 9", "new_string": "z = 0"})
    assert missing.failed and "not found" in missing.result.content and "lines 1, 3" not in missing.result.content
    assert (root / "dup.txt").read_text() == "x = 1\ny = 2\nx = 1\n"
    ok = await _run(root, "edit_file", {"path": "dup.txt", "old_string": "y = 2", "new_string": "y = 20"})
    assert not ok.failed and "line 2" in ok.result.content
    assert (root / "dup.txt").read_text() == "x = 1\ny = 20\nx = 1\n"
    (diff,) = ok.result.diffs
    assert diff.path == str((root / "dup.txt").resolve()) and diff.old_text == "x = 1\ny = 2\nx = 1\n"
    again = await _run(root, "edit_file", {"path": "dup.txt", "old_string": "y = 2\n", "new_string": "y = 20\n"})
    assert not again.failed and "already contains" in again.result.content and "already applied" in again.result.content


async def test_edit_preserves_crlf_and_file_mode(root):
    target = root / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\n")
    target.chmod(0o751)
    run = await _run(root, "edit_file", {"path": "win.txt", "old_string": "two", "new_string": "three"})
    assert not run.failed
    assert target.read_bytes() == b"one\r\nthree\r\n"
    assert target.stat().st_mode & 0o777 == 0o751


async def test_write_file_new_file_diff_has_no_old_text(root):
    run = await _run(root, "write_file", {"path": "new/dir/file.txt", "content": "hi\n"})
    assert not run.failed and (root / "new/dir/file.txt").read_text() == "hi\n"
    assert run.result.diffs[0].old_text is None and run.content[0].old_text is None


async def test_glob_and_grep(root):
    (root / "node_modules").mkdir()
    (root / "node_modules" / "skip.py").write_text("line 7\n")
    listed = await _run(root, "glob", {"pattern": "**/*.py"})
    assert listed.result.content.splitlines() == ["src/app.py  391B"]
    found = await _run(root, "grep", {"pattern": r"line 4\d", "glob": "*.py", "limit": 3})
    lines = found.result.content.splitlines()
    assert lines[:3] == ["src/app.py:40:line 40", "src/app.py:41:line 41", "src/app.py:42:line 42"]
    assert lines[-1] == "[7 more matching lines not shown; narrow the pattern, path or glob]"
    bad = await _run(root, "grep", {"pattern": "("})
    assert bad.failed and "Invalid regular expression" in bad.result.content


async def test_run_command_reports_exit_code_and_output(root):
    ok = await _run(root, "run_command", {"command": "echo out; echo err >&2"})
    assert not ok.failed and ok.result.content.startswith("exit code 0") and "out" in ok.result.content and "err" in ok.result.content
    failing = await _run(root, "run_command", {"command": "echo nope; exit 3"})
    assert failing.failed and failing.result.content.startswith("exit code 3") and "nope" in failing.result.content
    slow = await _run(root, "run_command", {"command": "sleep 5", "timeout": 0.3})
    assert slow.failed and "timed out" in slow.result.content


async def test_commands_do_not_inherit_api_keys(root, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak-0000")
    run = await _run(root, "run_command", {"command": "env"})
    assert "sk-should-not-leak" not in run.result.content


async def test_invalid_arguments_and_unknown_tools_fail_readably(root):
    missing = await _run(root, "edit_file", {"path": "dup.txt"})
    assert missing.failed and "old_string" in missing.result.content and "Invalid arguments for edit_file" in missing.result.content
    unknown = await run_tool(TOOLS, ToolCallPart(id="c", name="rm_everything", arguments={}), _ctx(root))
    assert unknown.failed and "Unknown tool" in unknown.result.content and "read_file" in unknown.result.content
    garbled = await run_tool(TOOLS, ToolCallPart(id="c", name="read_file", arguments={}, invalid_arguments="{oops"), _ctx(root))
    assert garbled.failed and "not a valid JSON object" in garbled.result.content


async def test_ask_mode_waits_for_an_answer_and_rejection_writes_nothing(root):
    events: list = []
    broker = ApprovalBroker(None, timeout=5)
    ctx = _ctx(root, mode="ask", events=events, broker=broker)
    call = ToolCallPart(id="c", name="write_file", arguments={"path": "a.txt", "content": "a"})
    task = asyncio.create_task(run_tool(TOOLS, call, ctx))
    while not any(isinstance(e, PermissionNeeded) for e in events):
        await asyncio.sleep(0.01)
    request = next(e.request for e in events if isinstance(e, PermissionNeeded))
    assert request.diffs[0].new_text == "a" and request.diffs[0].old_text is None
    assert await broker.answer(request.id, Decision.REJECT_ONCE, by="test")
    assert not await broker.answer(request.id, Decision.ALLOW_ONCE, by="late"), "the first answer wins"
    run = await task
    assert run.failed and "rejected" in run.result.content
    assert not (root / "a.txt").exists()


async def test_unanswered_approval_times_out_as_rejected(root):
    ctx = _ctx(root, mode="ask", broker=ApprovalBroker(None, timeout=0.2))
    run = await run_tool(TOOLS, ToolCallPart(id="c", name="run_command", arguments={"command": "touch x"}), ctx)
    assert run.failed and "timed out" in run.result.content
    assert not (root / "x").exists()
