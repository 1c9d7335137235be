"""edit_file's matching strategies and apply_patch's placement, all-or-nothing both."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.events import Decision
from core.tools.errors import ToolError
from tests.toolsets.helpers import Session
from toolsets.editor.edits import apply_edit


@pytest.fixture
def root(tmp_path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project.resolve()


CODE = "def f():\n    if x:\n        return 1\n    return 2\n"


@pytest.mark.parametrize(
    "text, old, new, expected, how",
    [
        (CODE, "        return 1", "        return 10", CODE.replace("return 1\n", "return 10\n"), "exact match at line 3"),
        (
            CODE.replace("\n", "\r\n"),
            "if x:\n        return 1",
            "if y:\n        return 1",
            CODE.replace("if x", "if y").replace("\n", "\r\n"),
            "line endings match at line 2",
        ),
        ("a = 1   \nb = 2\t\n", "a = 1\nb = 2\n", "a = 10\nb = 20\n", "a = 10\nb = 20\n", "trailing whitespace match at line 1"),
        (
            CODE,
            "if x:\n    return 1",
            "if x:\n    return 1\nelse:\n    pass",
            "def f():\n    if x:\n        return 1\n    else:\n        pass\n    return 2\n",
            "indentation (+4) match at line 2",
        ),
        (
            "\t\tcall()\n\t\tdone()\n",
            "    call()\n    done()",
            "    call(1)\n    done()",
            "\t\tcall(1)\n\t\tdone()\n",
            "indentation (-2) match at line 1",
        ),
    ],
    ids=["exact", "crlf", "trailing-ws", "indent-deeper", "indent-tabs"],
)
def test_matching_strategies_say_how_they_matched(text, old, new, expected, how):
    applied = apply_edit(text, old, new)
    assert applied.text == expected and applied.note == how


def test_inserted_lines_take_the_files_line_endings():
    applied = apply_edit("a\r\nb\r\n", "a", "a\nnew")
    assert applied.text == "a\r\nnew\r\nb\r\n"


def test_ambiguity_lists_candidate_lines_for_every_strategy():
    with pytest.raises(ToolError, match=r"matches 2 times \(exact\) at lines 1, 3"):
        apply_edit("x = 1\ny\nx = 1\n", "x = 1", "x = 2")
    with pytest.raises(ToolError, match=r"matches 2 times \(trailing whitespace\) at lines 1, 3"):
        apply_edit("x = 1 \ny\nx = 1\t\n", "x = 1\n", "x = 2\n")
    assert apply_edit("x = 1\ny\nx = 1\n", "x = 1", "x = 2", replace_all=True).text == "x = 2\ny\nx = 2\n"


def test_already_applied_is_a_no_op_even_when_new_contains_old():
    text = "items = [1]\nitems.append(2)\n"
    assert apply_edit(text, "items = []", "items = [1]").note == "already applied"
    grown = apply_edit("call(a)\n", "call(a)", "call(a, b)")
    assert apply_edit(grown.text, "call(a)", "call(a, b)").note == "already applied"
    with pytest.raises(ToolError, match="not found.*closest line is 1"):
        apply_edit("def compute(a, b):\n    pass\n", "def compute(a, c):", "def compute(a, d):")


async def test_several_edits_apply_atomically(root):
    target = root / "app.py"
    target.write_text(CODE)
    session = Session(root)
    failing = await session.run(
        "edit_file",
        {
            "path": "app.py",
            "edits": [{"old_string": "return 1", "new_string": "return 10"}, {"old_string": "return 99", "new_string": "x"}],
        },
    )
    assert failing.failed and "edit 2 of 2" in failing.result.content and "nothing was changed" in failing.result.content
    assert target.read_text() == CODE
    both = await session.run(
        "edit_file",
        {
            "path": "app.py",
            "old_string": "def f():",
            "new_string": "def g():",
            "edits": [{"old_string": "return 1", "new_string": "return 10"}, {"old_string": "return 2", "new_string": "return 20"}],
        },
    )
    assert not both.failed, both.result.content
    assert target.read_text() == "def g():\n    if x:\n        return 10\n    return 20\n"
    assert "exact match at line 1; exact match at line 3; exact match at line 4" in both.result.content
    assert "@@ -1,4 +1,4 @@\n-def f():\n+def g():\n     if x:\n" in both.result.content, "the result carries a unified diff"


async def test_the_diff_is_in_the_approval_request_before_anything_is_written(root):
    target = root / "app.py"
    target.write_text(CODE)
    session = Session(root, mode="ask")

    def check(request) -> None:
        assert target.read_text() == CODE, "nothing written before the answer"
        (diff,) = request.diffs
        assert diff.path == str(target) and diff.old_text == CODE and "return 10" in diff.new_text

    run = await session.run(
        "edit_file",
        {"path": "app.py", "old_string": "return 1", "new_string": "return 10"},
        answer=Decision.ALLOW_ONCE,
        before_answer=check,
    )
    assert not run.failed and "return 10" in target.read_text()
    assert run.result.diffs[0].old_text == CODE


# --- apply_patch ----------------------------------------------------------------------------


def _file(root: Path, name: str, lines: int) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"line {i}\n" for i in range(1, lines + 1)))
    return path


async def test_patch_over_several_files_with_create_delete_and_rename(root):
    _file(root, "a.txt", 5)
    _file(root, "gone.txt", 2)
    _file(root, "old/name.txt", 3)
    patch = """diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -2,3 +2,3 @@
 line 2
-line 3
+line three
 line 4
--- /dev/null
+++ b/new/file.txt
@@ -0,0 +1,2 @@
+hello
+world
--- a/gone.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-line 1
-line 2
diff --git a/old/name.txt b/new/name.txt
similarity index 80%
rename from old/name.txt
rename to new/name.txt
--- a/old/name.txt
+++ b/new/name.txt
@@ -1,3 +1,3 @@
 line 1
-line 2
+line two
 line 3
"""
    session = Session(root, mode="ask")
    run = await session.run("apply_patch", {"patch": patch}, answer=Decision.ALLOW_ONCE)
    assert not run.failed, run.result.content
    assert (root / "a.txt").read_text() == "line 1\nline 2\nline three\nline 4\nline 5\n"
    assert (root / "new/file.txt").read_text() == "hello\nworld\n"
    assert not (root / "gone.txt").exists() and not (root / "old/name.txt").exists()
    assert (root / "new/name.txt").read_text() == "line 1\nline two\nline 3\n"
    assert "created new/file.txt" in run.result.content and "deleted gone.txt" in run.result.content
    assert "renamed old/name.txt -> new/name.txt" in run.result.content
    paths = {d.path for d in session.answered.diffs}
    assert str(root / "new/file.txt") in paths and str(root / "gone.txt") in paths
    again = await session.run("apply_patch", {"patch": patch.split("--- /dev/null")[0]})
    assert not again.failed and "already applied" in again.result.content


async def test_offsets_fuzz_and_wrong_counts_are_tolerated(root):
    target = _file(root, "a.txt", 40)
    # The header says line 2 but the lines are at 20; the counts are wrong; one context line is stale.
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -2,9 +2,9 @@\n changed context\n line 20\n-line 21\n+line twenty-one\n line 22\n"
    run = await Session(root).run("apply_patch", {"patch": patch})
    assert not run.failed, run.result.content
    assert "line 20\nline twenty-one\nline 22\n" in target.read_text()
    assert "applied at line 20 (offset +18) with fuzz 1" in run.result.content


async def test_a_hunk_that_cannot_be_placed_names_file_and_hunk_and_writes_nothing(root):
    a = _file(root, "a.txt", 5)
    b = _file(root, "b.txt", 5)
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n line 1\n-line 2\n+line II\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n line 1\n-line 2\n+line II\n@@ -4,2 +4,2 @@\n-not in the file\n-nor this\n+x\n+y\n"
    )
    run = await Session(root).run("apply_patch", {"patch": patch})
    assert run.failed and "b.txt: hunk 2 (@@ -4,2 +4,2 @@) does not apply" in run.result.content
    assert a.read_text() == "".join(f"line {i}\n" for i in range(1, 6)), "all or nothing"
    assert b.read_text() == "".join(f"line {i}\n" for i in range(1, 6))
    garbage = await Session(root).run("apply_patch", {"patch": "please change line 2"})
    assert garbage.failed and "no file changes" in garbage.result.content


async def test_patch_keeps_crlf_and_handles_no_newline_at_end(root):
    target = root / "w.txt"
    target.write_bytes(b"a\r\nb\r\nc\r\n")
    patch = "--- a/w.txt\n+++ b/w.txt\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n\\ No newline at end of file\n"
    run = await Session(root).run("apply_patch", {"patch": patch})
    assert not run.failed, run.result.content
    assert target.read_bytes() == b"a\r\nb\r\nC"


async def test_a_huge_file_shows_only_the_changed_lines(root):
    text = "".join(f"row {i}\n" for i in range(100_000))
    target = root / "huge.txt"
    target.write_text(text)
    session = Session(root, mode="ask")
    run = await session.run(
        "edit_file", {"path": "huge.txt", "old_string": "row 50000\n", "new_string": "row fifty thousand\n"}, answer=Decision.ALLOW_ONCE
    )
    assert not run.failed and "row fifty thousand" in target.read_text()
    (diff,) = session.answered.diffs
    assert diff.old_text == "".join(f"row {i}\n" for i in range(49_997, 50_004))
    assert diff.new_text == diff.old_text.replace("row 50000\n", "row fifty thousand\n")
    assert "@@ -49999,5 +49999,5 @@" in run.result.content and "-row 50000\n+row fifty thousand" in run.result.content


async def test_a_forgotten_new_string_is_an_error_not_a_deletion(root):
    target = root / "app.py"
    target.write_text(CODE)
    run = await Session(root).run("edit_file", {"path": "app.py", "old_string": "return 2"})
    assert run.failed and "new_string is missing" in run.result.content and target.read_text() == CODE
    deleted = await Session(root).run("edit_file", {"path": "app.py", "old_string": "    return 2\n", "new_string": ""})
    assert not deleted.failed and target.read_text() == CODE.replace("    return 2\n", "")
