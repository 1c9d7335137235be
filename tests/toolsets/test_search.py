"""grep (ripgrep and the pure-Python fallback give the same answer), glob and list_dir."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.toolsets.helpers import Session
from toolsets.editor.search import GrepArgs, _format, grep_python, grep_ripgrep, ripgrep_path


@pytest.fixture
def tree(tmp_path) -> Path:
    root = (tmp_path / "project").resolve()
    files = {
        ".gitignore": "build/\n*.log\n!keep.log\n",
        "src/app.py": "import os\n\ndef main():\n    print('hello')\n    return 0\n",
        "src/util.py": "def helper():\n    return 'hello world'\n",
        "src/sub/.gitignore": "generated.py\n",
        "src/sub/generated.py": "hello = 'ignored by a nested .gitignore'\n",
        "src/sub/kept.py": "HELLO = 1\nhello_again = 2\n",
        "build/out.py": "hello = 'ignored build output'\n",
        "debug.log": "hello from a log\n",
        "keep.log": "hello kept by a negation\n",
        ".github/workflows/ci.yml": "run: echo hello\n",
        "node_modules/pkg/index.js": "hello\n",
        ".env": "SECRET=hello\n",
        "docs/readme.md": "".join(f"hello line {i}\n" for i in range(1, 31)),
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "image.bin").write_bytes(b"hello\x00\x01\x02")
    (root / "utf16.txt").write_bytes(b"\xff\xfe" + "say hello\n".encode("utf-16-le"))
    return root


def _both(tree: Path, **kw):
    args = GrepArgs(**kw)
    regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
    return args, grep_python(tree, tree, regex, args)


RG = ripgrep_path()
CASES = [
    {"pattern": "hello"},
    {"pattern": "hello", "ignore_case": True, "limit": 12},
    {"pattern": "hello", "context": 2, "limit": 5},
    {"pattern": "hel+o", "glob": "*.py"},
    {"pattern": "return", "context": 1, "glob": "src/**"},
    {"pattern": r"line (1|2)\d", "limit": 3},
]


@pytest.mark.skipif(RG is None, reason="ripgrep is not installed")
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
async def test_ripgrep_and_python_agree(tree, case):
    args, python = _both(tree, **case)
    rg = await grep_ripgrep(RG, tree, args)
    assert rg is not None
    session = Session(tree)
    assert _format(session.ctx(), rg, args) == _format(session.ctx(), python, args)
    assert (rg.matches, rg.shown, rg.secrets) == (python.matches, python.shown, python.secrets)


async def test_grep_respects_ignores_and_never_shows_secrets(tree):
    run = await Session(tree).run("grep", {"pattern": "hello", "limit": 500})
    text = run.result.content
    shown = {line.split(":")[0] for line in text.splitlines() if ":" in line and not line.startswith("[")}
    assert shown == {".github/workflows/ci.yml", "docs/readme.md", "keep.log", "src/app.py", "src/util.py", "src/sub/kept.py", "utf16.txt"}
    assert "SECRET" not in text and "[1 file(s) that may hold secrets were not searched]" in text


async def test_grep_caps_and_counts_what_it_left_out(tree):
    text = (await Session(tree).run("grep", {"pattern": "hello", "limit": 3})).result.content
    lines = text.splitlines()
    assert lines[:3] == [".github/workflows/ci.yml:1:run: echo hello", "docs/readme.md:1:hello line 1", "docs/readme.md:2:hello line 2"]
    assert lines[3] == "[33 more matching lines in 5 more files not shown; narrow the pattern, path or glob]"


async def test_grep_context_marks_context_lines_and_gaps(tree):
    text = (await Session(tree).run("grep", {"pattern": "print|helper", "context": 1, "path": "src"})).result.content
    assert text.splitlines() == [
        "src/app.py-3-def main():",
        "src/app.py:4:    print('hello')",
        "src/app.py-5-    return 0",
        "--",
        "src/util.py:1:def helper():",
        "src/util.py-2-    return 'hello world'",
    ]


async def test_grep_falls_back_to_python_for_lookaround(tree):
    text = (await Session(tree).run("grep", {"pattern": r"hello(?= world)"})).result.content
    assert text.splitlines() == ["src/util.py:2:    return 'hello world'"]


async def test_grep_errors(tree):
    session = Session(tree)
    bad = await session.run("grep", {"pattern": "("})
    assert bad.failed and "Invalid regular expression" in bad.result.content
    missing = await session.run("grep", {"pattern": "x", "path": "nope"})
    assert missing.failed and "does not exist" in missing.result.content


async def test_glob_lists_files_with_sizes_skipping_ignored(tree):
    text = (await Session(tree).run("glob", {"pattern": "**/*.py"})).result.content
    sizes = [(tree / p).stat().st_size for p in ("src/app.py", "src/sub/kept.py", "src/util.py")]
    assert text.splitlines() == [f"src/app.py  {sizes[0]}B", f"src/sub/kept.py  {sizes[1]}B", f"src/util.py  {sizes[2]}B"]
    capped = (await Session(tree).run("glob", {"pattern": "*", "limit": 2})).result.content.splitlines()
    assert len(capped) == 3 and capped[2].startswith("[") and "more files match" in capped[2]


async def test_list_dir_shows_kinds_sizes_and_what_it_skipped(tree):
    (tree / "link").symlink_to("src/app.py")
    text = (await Session(tree).run("list_dir", {"path": ".", "depth": 2})).result.content
    lines = text.splitlines()
    assert ".github/  (1 entries)" in lines and "src/  (3 entries)" in lines
    assert "  app.py  55B" in lines and "link -> src/app.py" in lines
    assert "build/  (1 entries)" not in lines and "debug.log  17B" not in lines
    assert lines[-1].startswith("[3 ignored entries not shown: ") and "build/" in lines[-1] and "node_modules/" in lines[-1]
    not_dir = await Session(tree).run("list_dir", {"path": "src/app.py"})
    assert not_dir.failed and "read_file" in not_dir.result.content
