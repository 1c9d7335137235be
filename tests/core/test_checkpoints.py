"""Checkpoints in the shadow repository: per turn, per session, undo with conflicts, never the user's repo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.host import checkpoint_pruning
from core.host import checkpoints as checkpoints_module
from core.host.checkpoints import Checkpoints, blob_id


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


async def _write(store: Checkpoints, session: str, turn: str, path: Path, content: str | None) -> None:
    """What ToolContext.apply_changes does around a write."""
    await store.snapshot(session, turn, [path])
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    await store.record_written(session, turn, [path])


async def test_one_checkpoint_per_turn_newest_first(project, hermes_home):
    store = Checkpoints()
    a, b = project / "a.txt", project / "b.txt"
    a.write_text("a0\n")
    await _write(store, "s", "t1", a, "a1\n")
    await _write(store, "s", "t1", b, "b1\n")
    await _write(store, "s", "t1", a, "a1bis\n")
    await _write(store, "s", "t2", a, "a2\n")
    listed = await store.list("s")
    assert [c.turn_id for c in listed] == ["t2", "t1"]
    assert [(f.path, f.existed) for f in listed[1].files] == [(str(a), True), (str(b), False)]
    assert listed[1].files[0].after == blob_id(b"a1bis\n"), "what the turn wrote last"
    assert (hermes_home / "checkpoints" / "shadow.git" / "HEAD").exists()
    assert await store.list("other-session") == []


async def test_undo_restores_bytes_mode_created_and_deleted_files(project):
    store = Checkpoints()
    kept, created, deleted = project / "kept.sh", project / "new.txt", project / "old.bin"
    kept.write_bytes(b"#!/bin/sh\r\necho 1\r\n")
    kept.chmod(0o750)
    deleted.write_bytes(b"\x00\x01binary")
    await store.snapshot("s", "t1", [kept, created, deleted])
    kept.write_text("changed\n")
    kept.chmod(0o644)
    created.write_text("fresh\n")
    deleted.unlink()
    await store.record_written("s", "t1", [kept, created, deleted])
    report = await store.undo_last("s")
    assert report.restored == [str(kept), str(deleted)] and report.removed == [str(created)]
    assert kept.read_bytes() == b"#!/bin/sh\r\necho 1\r\n" and kept.stat().st_mode & 0o777 == 0o750
    assert deleted.read_bytes() == b"\x00\x01binary" and not created.exists()
    assert await store.list("s") == []
    assert "Nothing to undo" in (await store.undo_last("s")).summary()
    # What the undo replaced is kept too: nothing is ever lost.
    import git

    saved = git.Repo(store.repo_path).commit(report.saved_as)
    assert (saved.tree / ("files" + str(kept))).data_stream.read() == b"changed\n"


async def test_undo_stops_at_changes_made_after_the_turn_unless_forced(project):
    store = Checkpoints()
    path = project / "a.txt"
    path.write_text("before\n")
    await _write(store, "s", "t1", path, "agent\n")
    path.write_text("the user edited after the turn\n")
    report = await store.undo_last("s")
    assert report.conflicts == [str(path)] and not report.restored
    assert "Nothing was undone" in report.summary() and path.read_text() == "the user edited after the turn\n"
    assert len(await store.list("s")) == 1, "the checkpoint stays"
    forced = await store.undo_last("s", force=True)
    assert forced.restored == [str(path)] and path.read_text() == "before\n"


async def test_undo_refuses_when_the_checkpoint_changed_under_it(project):
    store = Checkpoints()
    path = project / "a.txt"
    path.write_text("0\n")
    await _write(store, "s", "t1", path, "1\n")
    stale = (await store.list("s"))[0].id
    await _write(store, "s", "t2", path, "2\n")
    with pytest.raises(RuntimeError, match="changed while undo was being approved"):
        await store.undo_last("s", expect=stale)
    assert path.read_text() == "2\n"


async def test_large_files_are_noted_not_kept(project, monkeypatch):
    monkeypatch.setattr(checkpoints_module, "MAX_FILE_BYTES", 10)
    store = Checkpoints()
    path = project / "big.txt"
    path.write_text("x" * 100)
    await _write(store, "s", "t1", path, "y")
    report = await store.undo_last("s")
    assert report.skipped == [str(path)] and path.read_text() == "y"


async def test_the_users_repository_is_never_touched(project):
    git_env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
        "HOME": str(project),
    }

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=project, env=git_env, capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    (project / "tracked.txt").write_text("v1\n")
    git("add", "tracked.txt")
    git("commit", "-qm", "init")
    (project / "tracked.txt").write_text("v1 + uncommitted\n")
    index = project / ".git" / "index"
    state = lambda: (
        git("for-each-ref"),
        git("stash", "list"),
        git("--no-optional-locks", "status", "--porcelain"),
        index.stat().st_mtime_ns,
    )
    before = state()
    store = Checkpoints()
    await _write(store, "s", "t1", project / "tracked.txt", "agent\n")
    await store.undo_last("s")
    after = state()
    assert after == before and (project / "tracked.txt").read_text() == "v1 + uncommitted\n"


def test_gitpython_is_imported_only_when_used():
    code = "import sys, core.host.checkpoints, core.tools.context, core.tools.dispatch; print('git' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"


def test_the_system_prompt_says_which_branch_and_how_many_changes(project):
    from core.agent.prompt import git_summary, system_prompt

    assert git_summary(project) is None and "Git:" not in system_prompt(project)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
        "HOME": str(project),
    }
    for args in (["init", "-q", "-b", "trunk"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", *args], cwd=project, env=env, check=True)
    assert git_summary(project) == "Git: branch trunk, clean"
    (project / "a.txt").write_text("a")
    (project / "b.txt").write_text("b")
    assert git_summary(project) == "Git: branch trunk, 2 changed files"
    assert "\nGit: branch trunk, 2 changed files\n" in system_prompt(project)
    assert "Git:" not in system_prompt(project, git=None)


def _objects(store: Checkpoints) -> set[str]:
    root = store.repo_path / "objects"
    return {d.name + f.name for d in root.iterdir() if len(d.name) == 2 for f in d.iterdir()}


def _age(store: Checkpoints, seconds: float) -> None:
    """Make every object look ``seconds`` old (pruning spares objects younger than its grace)."""
    import os
    import time

    then = time.time() - seconds
    for d in (store.repo_path / "objects").iterdir():
        for f in d.iterdir() if len(d.name) == 2 else ():
            os.utime(f, (then, then))


async def test_prune_deletes_what_nothing_points_at_and_undo_still_works(project):
    store = Checkpoints()
    a = project / "a.txt"
    a.write_text("v0\n")
    await _write(store, "s", "t1", a, "v1\n")
    await _write(store, "s", "t2", a, "v2\n")
    before = _objects(store)
    _age(store, 7200)
    report = await store.prune()
    after = _objects(store)
    # Each turn's commit is replaced once its writes are recorded: the first versions go.
    assert report.objects_removed > 0 and after < before and report.objects_kept == len(after)
    assert report.sessions_dropped == 0
    assert [c.turn_id for c in await store.list("s")] == ["t2", "t1"]
    assert (await store.undo_last("s")).done and a.read_text() == "v1\n"
    assert (await store.undo_last("s")).done and a.read_text() == "v0\n"


async def test_prune_spares_young_objects_and_lets_go_of_old_sessions(project, monkeypatch):
    store = Checkpoints()
    old, recent = project / "old.txt", project / "recent.txt"
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2020-01-01T00:00:00")  # how git dates a commit
    await _write(store, "old-session", "t1", old, "old\n")
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    await _write(store, "new-session", "t1", recent, "new\n")
    young = await store.prune()  # everything was just written: within the grace period
    assert young.objects_removed == 0 and young.sessions_dropped == 1
    assert await store.list("old-session") == [] and len(await store.list("new-session")) == 1
    _age(store, 7200)
    aged = await store.prune()
    assert aged.objects_removed > 0 and aged.sessions_dropped == 0
    assert len(await store.list("new-session")) == 1
    everything = await store.prune(keep_days=0, grace=0)
    assert everything.sessions_dropped == 0, "keep_days=0 keeps every session"


async def test_a_prune_runs_on_its_own_once_a_day(project):
    import asyncio
    import os
    import time

    store = Checkpoints()
    a = project / "a.txt"
    await _write(store, "s", "t1", a, "v1\n")
    stamp = store.directory / "pruned-at"
    assert stamp.exists(), "a new repository starts the clock"
    await _write(store, "s", "t2", a, "v2\n")
    _age(store, 7200)
    before = _objects(store)
    day_ago = time.time() - checkpoint_pruning.PRUNE_EVERY - 60
    os.utime(stamp, (day_ago, day_ago))
    await _write(store, "s", "t3", a, "v3\n")
    for _ in range(100):
        if not checkpoint_pruning._PRUNE_TASKS:
            break
        await asyncio.sleep(0.05)
    assert stamp.stat().st_mtime > day_ago, "the prune renewed its stamp"
    assert before - _objects(store), "replaced commits of t1 and t2 were removed"
    assert [c.turn_id for c in await store.list("s")] == ["t3", "t2", "t1"]


def test_the_cli_prunes(project, hermes_home):
    import asyncio

    cli = [sys.executable, "-m", "hermes_cli", "checkpoints", "prune"]
    empty = subprocess.run(cli, capture_output=True, text=True, check=True)
    assert "No checkpoints yet." in empty.stdout
    asyncio.run(_write(Checkpoints(), "s", "t1", project / "a.txt", "x\n"))
    done = subprocess.run([*cli, "--keep-days", "0"], capture_output=True, text=True, check=True)
    assert "Let go of 0 old session(s)" in done.stdout and "kept" in done.stdout
    bad = subprocess.run([*cli, "--keep-days", "-1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--keep-days" in bad.stdout
