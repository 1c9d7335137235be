"""Filesystem escapes: every way out of the project is refused for writes (even in auto mode),
and reads outside it ask; secrets always ask."""

from __future__ import annotations

import os

import pytest

from core.events import Decision
from tests.toolsets.helpers import Session


@pytest.fixture
def world(tmp_path):
    project = tmp_path / "project"
    outside = tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "target.txt").write_text("outside\n")
    (project / "inside.txt").write_text("inside\n")
    (project / "link_out").symlink_to(outside)  # a directory symlink leaving the project
    (project / "file_link").symlink_to(outside / "target.txt")
    return project, outside


ESCAPES = [
    "../outside/target.txt",
    "../../outside/target.txt",
    "{outside}/target.txt",
    "link_out/target.txt",
    "file_link",
    "./sub/../../outside/target.txt",
    "~/../outside/target.txt",
    "{outside}/../outside/target.txt",
    "{project}/../outside/target.txt",
]


@pytest.mark.parametrize("template", ESCAPES)
@pytest.mark.parametrize("tool", ["write_file", "edit_file", "delete_file"])
async def test_writes_out_of_the_project_are_refused_in_auto_mode(world, template, tool, monkeypatch):
    project, outside = world
    monkeypatch.setenv("HOME", str(project))  # "~/.." leads out too
    path = template.format(outside=outside, project=project)
    args = {
        "write_file": {"path": path, "content": "pwned\n"},
        "edit_file": {"path": path, "old_string": "outside", "new_string": "pwned"},
        "delete_file": {"path": path},
    }[tool]
    session = Session(project, mode="auto")
    run = await session.run(tool, args, answer=Decision.ALLOW_ONCE)
    assert run.failed, run.result.content
    assert (outside / "target.txt").read_text() == "outside\n"


async def test_move_out_of_and_into_the_project_is_refused(world):
    project, outside = world
    session = Session(project, mode="auto")
    out = await session.run("move_file", {"source": "inside.txt", "destination": str(outside / "stolen.txt")}, answer=Decision.ALLOW_ONCE)
    assert out.failed and not (outside / "stolen.txt").exists() and (project / "inside.txt").exists()
    into = await session.run("move_file", {"source": str(outside / "target.txt"), "destination": "mine.txt"}, answer=Decision.ALLOW_ONCE)
    assert into.failed and (outside / "target.txt").exists()


async def test_symlink_swapped_after_approval_is_not_followed_out(world):
    """The file is checked, approved, then swapped for a link out of the project before the write."""
    project, outside = world
    victim = project / "swap.txt"
    victim.write_text("original\n")
    session = Session(project, mode="ask")

    def swap(_request) -> None:
        victim.unlink()
        victim.symlink_to(outside / "target.txt")

    run = await session.run("write_file", {"path": "swap.txt", "content": "pwned\n"}, answer=Decision.ALLOW_ONCE, before_answer=swap)
    assert (outside / "target.txt").read_text() == "outside\n"
    assert run.failed


async def test_reads_outside_ask_and_secrets_always_ask(world):
    project, outside = world
    (project / ".env").write_text("API_KEY=x\n")
    with pytest.raises(AssertionError, match="outside the project"):
        await Session(project, mode="auto").run("read_file", {"path": str(outside / "target.txt")})
    with pytest.raises(AssertionError, match="secret"):
        await Session(project, mode="auto").run("read_file", {"path": ".env"})
    ok = await Session(project, mode="auto").run("read_file", {"path": "inside.txt"})
    assert not ok.failed


async def test_very_long_and_odd_paths_fail_cleanly(world):
    project, _ = world
    session = Session(project, mode="auto")
    long_name = "a" * 300
    run = await session.run("write_file", {"path": f"{long_name}/{long_name}.txt", "content": "x"}, answer=Decision.ALLOW_ONCE)
    assert run.failed
    nul = await session.run("write_file", {"path": "bad\x00name.txt", "content": "x"}, answer=Decision.ALLOW_ONCE)
    assert nul.failed
    assert sorted(os.listdir(project)) == sorted(["inside.txt", "link_out", "file_link"])


async def test_case_tricks_on_secret_names_still_ask(world):
    project, _ = world
    (project / ".ENV").write_text("SECRET=1\n")
    (project / "Id_Rsa").write_text("key\n")
    for name in (".ENV", "Id_Rsa"):
        with pytest.raises(AssertionError, match="asked"):
            await Session(project, mode="auto").run("read_file", {"path": name})
