"""``hermes-editor checkpoints [list [SESSION] | prune]`` through the installed console script."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from core.host.checkpoints import Checkpoints
from core.store import SessionStore
from tests.hermes_cli.entry import hermes_editor


def _seed(home: Path, project: Path) -> None:
    """Sessions abc123 (two turns: one edit, one new file) and abd456 (one edit); fff999 has none."""

    async def body() -> None:
        async with SessionStore.open(home / "state.db") as store:
            for sid in ("abc123", "abd456", "fff999"):
                await store.create_session(cwd=project, surface="acp", session_id=sid, title=f"title {sid}")
        checkpoints = Checkpoints()
        edited, created = project / "calc.py", project / "notes.md"
        edited.write_text("one\n")
        for session, turn, path, text in (
            ("abc123", "t1", edited, "two\n"),
            ("abc123", "t2", created, "new\n"),
            ("abd456", "t1", edited, "three\n"),
        ):
            await checkpoints.snapshot(session, turn, [path])
            path.write_text(text)
            await checkpoints.record_written(session, turn, [path])

    asyncio.run(body())


def test_checkpoints_list_by_session_prefix_and_by_default(hermes_home, tmp_path):
    empty = hermes_editor("checkpoints")
    assert empty.returncode == 0 and "No checkpoints yet." in empty.stdout
    assert json.loads(hermes_editor("checkpoints", "list", "--json").stdout) == []
    _seed(hermes_home, tmp_path)

    one = hermes_editor("checkpoints", "list", "abc")
    assert one.returncode == 0, one.stderr
    lines = one.stdout.splitlines()
    assert lines[0].startswith("abc123  title abc123")
    assert "turn t2" in lines[1] and f"{tmp_path / 'notes.md'} (new)" in lines[1], "newest first"
    assert "turn t1" in lines[2] and str(tmp_path / "calc.py") in lines[2] and "(new)" not in lines[2]
    assert "abd456" not in one.stdout

    bare = hermes_editor("checkpoints")
    assert bare.returncode == 0 and "abc123" in bare.stdout and "abd456" in bare.stdout and "fff999" not in bare.stdout
    rows = json.loads(hermes_editor("checkpoints", "--json").stdout)
    assert sorted((r["session_id"], r["turn_id"]) for r in rows) == [("abc123", "t1"), ("abc123", "t2"), ("abd456", "t1")]
    first = next(r for r in rows if r["session_id"] == "abd456")
    assert first["files"] == [{"path": str(tmp_path / "calc.py"), "existed": True, "kept": True}] and first["created_at"].endswith("+00:00")

    none = hermes_editor("checkpoints", "list", "fff")
    assert none.returncode == 0 and "No checkpoints for this session." in none.stdout
    ambiguous = hermes_editor("checkpoints", "list", "ab")
    assert ambiguous.returncode == 1 and "'ab' matches more than one session" in ambiguous.stderr
    assert "abc123  title abc123" in ambiguous.stderr and "abd456  title abd456" in ambiguous.stderr
    missing = hermes_editor("checkpoints", "list", "zzz")
    assert missing.returncode == 1 and "No session 'zzz'" in missing.stderr


def test_checkpoints_prune_keeps_recent_sessions(hermes_home, tmp_path):
    assert "No checkpoints yet." in hermes_editor("checkpoints", "prune").stdout
    _seed(hermes_home, tmp_path)
    pruned = hermes_editor("checkpoints", "prune", "--keep-days", "0")
    assert pruned.returncode == 0 and "Let go of 0 old session(s)" in pruned.stdout, pruned.stdout + pruned.stderr
    assert len(json.loads(hermes_editor("checkpoints", "--json").stdout)) == 3
    bad = hermes_editor("checkpoints", "prune", "--keep-days", "-1")
    assert bad.returncode == 2 and "--keep-days must be 0 or more" in bad.stdout
