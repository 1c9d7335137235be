"""read_file, write_file, delete_file, move_file: encodings, binaries, line endings, modes, stale writes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from core.events import Decision
from core.host.local import LocalHost
from core.host.text_files import decode_text, encode_text, write_atomic
from tests.toolsets.helpers import Session


@pytest.fixture
def root(tmp_path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project.resolve()


async def test_read_ranges_caps_and_long_lines(root):
    (root / "big.txt").write_text("".join(f"row {i}\n" for i in range(1, 3001)) + "x" * 2500 + "\n")
    session = Session(root)
    first = (await session.run("read_file", {"path": "big.txt"})).result.content.splitlines()
    assert first[0] == "     1\trow 1" and first[1999] == "  2000\trow 2000"
    assert first[-1] == "[truncated: showing lines 1-2000 of 3001. Read more with offset=2001]"
    tail = (await session.run("read_file", {"path": "big.txt", "offset": 3001})).result.content
    assert tail.startswith("  3001\t" + "x" * 2000 + " [line cut: 500 more characters]")
    window = (await session.run("read_file", {"path": "big.txt", "offset": 5, "limit": 2})).result.content
    assert window.splitlines() == ["     5\trow 5", "     6\trow 6", "[truncated: showing lines 5-6 of 3001. Read more with offset=7]"]
    empty = root / "empty.txt"
    empty.write_text("")
    assert (await session.run("read_file", {"path": "empty.txt"})).result.content == "(empty file)"


@pytest.mark.parametrize(
    "data, what",
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00", "a PNG image"),
        (b"\x7fELF\x02\x01", "an executable"),
        (b"abc\x00def", "binary data"),
        (bytes(range(1, 32)) * 20, "binary data"),
    ],
)
async def test_binary_files_are_refused_with_what_they_look_like(root, data, what):
    (root / "blob").write_bytes(data)
    run = await Session(root).run("read_file", {"path": "blob"})
    assert run.failed and "not a text file" in run.result.content and what in run.result.content


@pytest.mark.parametrize(
    "raw, encoding, text",
    [
        ("héllo\n".encode(), "utf-8", "héllo\n"),
        (b"\xef\xbb\xbfh\xc3\xa9llo\r\n", "utf-8-sig", "héllo\r\n"),
        (b"\xff\xfe" + "héllo\n".encode("utf-16-le"), "utf-16-le", "héllo\n"),
        (b"\xfe\xff" + "héllo\n".encode("utf-16-be"), "utf-16-be", "héllo\n"),
        (b"caf\xe9 \x93quoted\x94\n", "cp1252", "café “quoted”\n"),
        (b"\x81\xe9\n", "latin-1", "\x81é\n"),
    ],
)
def test_encodings_are_detected_and_round_trip(raw, encoding, text):
    found = decode_text(raw)
    assert (found.encoding, found.text) == (encoding, text)
    assert encode_text(found.text, found.encoding) == raw


@pytest.mark.parametrize(
    "raw, old, new, expected",
    [
        (b"\xef\xbb\xbfname = 1\r\nother = 2\r\n", "name = 1", "name = 10", b"\xef\xbb\xbfname = 10\r\nother = 2\r\n"),
        (b"\xff\xfe" + "a = 1\nb = 2\n".encode("utf-16-le"), "b = 2", "b = 3", b"\xff\xfe" + "a = 1\nb = 3\n".encode("utf-16-le")),
        (b"caf\xe9 = 1\nx = 2\n", "x = 2", "x = 3", b"caf\xe9 = 1\nx = 3\n"),
        (b"no final newline", "final", "last", b"no last newline"),
    ],
    ids=["utf8-bom-crlf", "utf16", "cp1252", "no-final-newline"],
)
async def test_edits_keep_encoding_bom_line_endings_and_mode(root, raw, old, new, expected):
    target = root / "f.txt"
    target.write_bytes(raw)
    target.chmod(0o640)
    run = await Session(root).run("edit_file", {"path": "f.txt", "old_string": old, "new_string": new})
    assert not run.failed, run.result.content
    assert target.read_bytes() == expected
    assert target.stat().st_mode & 0o777 == 0o640


async def test_a_character_the_encoding_lacks_is_refused_before_asking(root):
    (root / "legacy.txt").write_bytes(b"caf\xe9\n")
    session = Session(root, mode="ask")
    run = await session.run("edit_file", {"path": "legacy.txt", "old_string": "café", "new_string": "café ☕"})
    assert run.failed and "cp1252" in run.result.content and "U+2615" in run.result.content
    assert not session.requests() and (root / "legacy.txt").read_bytes() == b"caf\xe9\n"


async def test_overwrite_keeps_crlf_and_final_newline(root):
    target = root / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\n")
    run = await Session(root).run("write_file", {"path": "win.txt", "content": "uno\ndos"})
    assert not run.failed and target.read_bytes() == b"uno\r\ndos\r\n"
    same = await Session(root).run("write_file", {"path": "win.txt", "content": "uno\ndos\n"})
    assert "already has this content" in same.result.content


def test_writes_are_atomic_and_follow_symlinks(tmp_path):
    tmp_path = tmp_path / "w"
    tmp_path.mkdir()
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"], "no temporary file left"
    fresh = tmp_path / "fresh.txt"
    write_atomic(fresh, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask


async def test_write_through_a_symlink_leaving_the_project_is_refused(root, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    (root / "sneaky.txt").symlink_to(outside)
    run = await Session(root).run("write_file", {"path": "sneaky.txt", "content": "pwned\n"})
    assert run.failed and "outside the project" in run.result.content
    assert outside.read_text() == "keep\n"
    dotdot = await Session(root).run("write_file", {"path": "../escape.txt", "content": "x"})
    assert dotdot.failed and not (tmp_path / "escape.txt").exists()


async def test_a_file_changed_since_it_was_read_is_not_written(root):
    target = root / "app.py"
    target.write_text("x = 1\ny = 2\n")
    session = Session(root)
    await session.run("read_file", {"path": "app.py"})
    target.write_text("x = 1\ny = 2\nz = 3  # the user typed this\n")
    for name, args in [
        ("edit_file", {"path": "app.py", "old_string": "y = 2", "new_string": "y = 20"}),
        ("write_file", {"path": "app.py", "content": "replaced\n"}),
        ("delete_file", {"path": "app.py"}),
        ("move_file", {"source": "app.py", "destination": "b.py"}),
    ]:
        run = await session.run(name, args)
        assert run.failed and "changed since you last read it" in run.result.content and "Read it again" in run.result.content, name
    assert target.read_text() == "x = 1\ny = 2\nz = 3  # the user typed this\n"
    await session.run("read_file", {"path": "app.py"})
    run = await session.run("edit_file", {"path": "app.py", "old_string": "y = 2", "new_string": "y = 20"})
    assert not run.failed
    again = await session.run("edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 10"})
    assert not again.failed, "its own write does not make the file stale"


async def test_a_change_made_while_approval_is_pending_is_never_overwritten(root):
    target = root / "app.py"
    target.write_text("a = 1\n")
    session = Session(root, mode="ask")

    def user_types(_request) -> None:
        target.write_text("a = 1\nb = 2  # typed while the question was open\n")

    run = await session.run(
        "edit_file", {"path": "app.py", "old_string": "a = 1", "new_string": "a = 2"}, answer=Decision.ALLOW_ONCE, before_answer=user_types
    )
    assert run.failed and "changed while waiting for approval" in run.result.content
    assert target.read_text() == "a = 1\nb = 2  # typed while the question was open\n"


async def test_delete_and_move_show_diffs_and_can_be_undone(root):
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("beta\n")
    (root / "blob.bin").write_bytes(b"\x00\x01")
    session = Session(root, mode="ask")
    deleted = await session.run("delete_file", {"path": "a.txt"}, answer=Decision.ALLOW_ONCE)
    assert not deleted.failed and not (root / "a.txt").exists()
    assert (
        session.answered.tool_kind == "delete"
        and session.answered.diffs[0].old_text == "alpha\n"
        and session.answered.diffs[0].new_text == ""
    )
    moved = await session.run("move_file", {"source": "b.txt", "destination": "sub/c.txt"}, answer=Decision.ALLOW_ONCE)
    assert not moved.failed and (root / "sub/c.txt").read_text() == "beta\n" and not (root / "b.txt").exists()
    assert session.answered.tool_kind == "move" and session.answered.paths == [str(root / "b.txt"), str(root / "sub/c.txt")]
    binary = await session.run("delete_file", {"path": "blob.bin"}, answer=Decision.ALLOW_ONCE)
    assert not binary.failed and not (root / "blob.bin").exists()
    clash = await session.run("move_file", {"source": "sub/c.txt", "destination": "sub/c.txt"})
    assert clash.failed and "already exists" in clash.result.content
    session.turn = "turn-2"
    undone = await session.run("undo", {}, answer=Decision.ALLOW_ONCE)
    assert not undone.failed, undone.result.content
    assert (root / "a.txt").read_text() == "alpha\n" and (root / "b.txt").read_text() == "beta\n"
    assert (root / "blob.bin").read_bytes() == b"\x00\x01" and not (root / "sub/c.txt").exists()


async def test_a_failed_write_puts_back_the_files_already_written(root):
    class FailingHost(LocalHost):
        async def write_text(self, path, content, *, encoding="utf-8"):
            if path.name == "second.txt":
                raise OSError(28, "No space left on device")
            await super().write_text(path, content, encoding=encoding)

    (root / "first.txt").write_text("1\n")
    (root / "second.txt").write_text("2\n")
    patch = "--- a/first.txt\n+++ b/first.txt\n@@ -1 +1 @@\n-1\n+one\n--- a/second.txt\n+++ b/second.txt\n@@ -1 +1 @@\n-2\n+two\n"
    run = await Session(root, host=FailingHost()).run("apply_patch", {"patch": patch})
    assert run.failed and "No space left" in run.result.content and "put back" in run.result.content
    assert (root / "first.txt").read_text() == "1\n" and (root / "second.txt").read_text() == "2\n"


async def test_read_only_mode_refuses_every_change(root):
    (root / "a.txt").write_text("a\n")
    session = Session(root, mode="read-only")
    assert not (await session.run("read_file", {"path": "a.txt"})).failed
    for name, args in [
        ("write_file", {"path": "b.txt", "content": "b"}),
        ("edit_file", {"path": "a.txt", "old_string": "a", "new_string": "b"}),
        ("delete_file", {"path": "a.txt"}),
        ("run_command", {"command": "ls"}),
    ]:
        run = await session.run(name, args)
        assert run.failed and "read-only" in run.result.content, name
    assert (root / "a.txt").read_text() == "a\n" and not (root / "b.txt").exists()


async def test_concurrent_reads_run_together(root):
    for i in range(5):
        (root / f"f{i}.txt").write_text(f"{i}\n")
    session = Session(root)
    runs = await asyncio.gather(*(session.run("read_file", {"path": f"f{i}.txt"}) for i in range(5)))
    assert [r.result.content for r in runs] == [f"     1\t{i}" for i in range(5)]
