"""The curator's proposals, stored until the user applies or rejects them.

They live in ``curator/proposals.json`` in the state home (0600), read and changed under an
exclusive lock (:func:`core.locked_json.locked_json`), so a scheduled run in the gateway and the
user's ``skills apply-proposal`` never interleave. Each proposal has a short id, what it would do
and why, where it came from (``heuristics`` or ``model``), and a fingerprint of what it would
change: the files of the skills' folders (and, for an archive, the skill's use record, so a skill
used since is not archived for being unused), or the bytes of a memory file.

Applying one re-checks that fingerprint under the lock. If anything changed, nothing is done:
the proposal turns ``stale`` and the user is told to run the curator again. An applied, rejected,
stale or superseded proposal is never applied. A curator run replaces the pending proposals of
earlier runs: what it proposes again keeps its id, what it no longer proposes is superseded, and
what the user rejected is not proposed again while it stays as it was.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from core.config import home
from core.learning import skills
from core.learning.consolidation import usable_rewrite
from core.learning.curator import Proposal, carry_out, is_pinned
from core.learning.memory import FILES, journal_change, memory_path
from core.locked_json import locked_json

__all__ = ["ProposalError", "StoredProposal", "apply", "fingerprint", "listing", "note_level", "proposals_path", "record", "reject"]

_KEEP_DECIDED = 90 * 86400  # decided proposals are forgotten after this long
_LEVELS_KEPT = 5


class ProposalError(Exception):
    """A proposal that cannot be applied or rejected; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class StoredProposal:
    id: str
    action: str  # archive | merge | consolidate
    name: str
    into: str | None
    reason: str
    source: str  # heuristics | model
    status: str  # pending | applied | rejected | stale | superseded
    created_at: float
    fingerprint: str
    text: str | None = None
    result: str | None = None
    decided_at: float | None = None
    run_id: str | None = None

    @classmethod
    def of(cls, raw: dict[str, Any]) -> StoredProposal:
        values: dict[str, Any] = {f.name: raw.get(f.name) for f in fields(cls)}
        return cls(**values)

    @property
    def proposal(self) -> Proposal:
        action = self.action if self.action in ("archive", "merge", "consolidate") else "archive"
        return Proposal(action, self.name, self.into, self.reason, self.text, self.source)  # type: ignore[arg-type]

    def describe(self) -> str:
        return self.proposal.describe()


def proposals_path() -> Path:
    return home() / "curator" / "proposals.json"


@contextmanager
def _locked() -> Iterator[dict[str, Any]]:
    path = proposals_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with locked_json(path) as data:
        for key in ("proposals", "memory_levels"):
            if not isinstance(data.get(key), dict):
                data[key] = {}
        yield data


# -- fingerprints ------------------------------------------------------------------------


def _folder_digest(folder: Path, digest: Any) -> None:
    """Feed every file under ``folder`` (names and bytes; a link by its target) into ``digest``."""
    if not folder.is_dir() or folder.is_symlink():
        digest.update(b"\0missing")
        return
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            digest.update(str(path.relative_to(folder)).encode("utf-8", "surrogateescape") + b"\0")
            if path.is_symlink():
                digest.update(b"link:" + os.readlink(path).encode("utf-8", "surrogateescape"))
                continue
            with open(path, "rb") as handle:
                while chunk := handle.read(1 << 16):
                    digest.update(chunk)
            digest.update(b"\0")


def fingerprint(proposal: Proposal) -> str:
    """A digest of what ``proposal`` would change, as it is now."""
    digest = hashlib.sha256(proposal.action.encode())
    if proposal.action == "consolidate":
        try:
            digest.update(memory_path(proposal.name).read_bytes())
        except FileNotFoundError:
            digest.update(b"\0missing")
        return digest.hexdigest()
    for name in (proposal.name, proposal.into):
        if name is not None:
            digest.update(b"\0skill:" + name.encode())
            _folder_digest(skills.personal_dir() / name, digest)
    if proposal.action == "archive":
        use = skills.usage().get(proposal.name, {})
        digest.update(f"\0uses:{use.get('uses', 0)}:{use.get('last_used')}".encode())
    return digest.hexdigest()


# -- recording ---------------------------------------------------------------------------


def _key(action: str, name: str, into: str | None) -> str:
    return f"{action}|{name}|{into or ''}"


def record(found: list[Proposal], *, run_id: str | None = None, now: float | None = None) -> list[StoredProposal]:
    """Store one curator run's proposals; returns those now pending from it (see the module docstring)."""
    now = time.time() if now is None else now
    prints = [(p, fingerprint(p)) for p in found]
    fresh: list[str] = []
    with _locked() as data:
        items: dict[str, dict[str, Any]] = data["proposals"]
        for proposal, print_ in prints:
            key = _key(proposal.action, proposal.name, proposal.into)
            same = [e for e in items.values() if _key(e["action"], e["name"], e.get("into")) == key and e.get("fingerprint") == print_]
            if any(e["status"] == "rejected" for e in same):
                continue
            entry = next((e for e in same if e["status"] == "pending"), None)
            if entry is None:
                entry = {"id": _new_id(items), "action": proposal.action, "name": proposal.name, "into": proposal.into}
                entry |= {"status": "pending", "created_at": now, "fingerprint": print_}
                items[entry["id"]] = entry
            entry |= {"reason": proposal.reason, "source": proposal.source, "text": proposal.text, "run_id": run_id}
            fresh.append(entry["id"])
        for entry in items.values():
            if entry["status"] == "pending" and entry["id"] not in fresh:
                entry |= {"status": "superseded", "decided_at": now}
        for entry_id in [i for i, e in items.items() if e["status"] != "pending" and now - (e.get("decided_at") or now) > _KEEP_DECIDED]:
            del items[entry_id]
        return [StoredProposal.of(items[i]) for i in fresh]


def _new_id(items: dict[str, Any]) -> str:
    while (candidate := uuid.uuid4().hex[:8]) in items:
        continue
    return candidate


def listing(status: str | None = "pending") -> list[StoredProposal]:
    """Stored proposals with ``status`` (None: all), oldest first."""
    with _locked() as data:
        found = [StoredProposal.of(e) for e in data["proposals"].values()]
    return sorted((p for p in found if status is None or p.status == status), key=lambda p: (p.created_at, p.id))


def note_level(kind: str, level: float) -> list[float]:
    """Remember how full memory file ``kind`` is at this run; returns its levels, oldest first."""
    with _locked() as data:
        levels = [float(x) for x in data["memory_levels"].get(kind, []) if isinstance(x, int | float)]
        levels = [*levels, round(level, 4)][-_LEVELS_KEPT:]
        data["memory_levels"][kind] = levels
    return levels


# -- deciding ----------------------------------------------------------------------------


def apply(proposal_id: str, *, now: float | None = None) -> str:
    """Carry out one pending proposal, if what it changes is as it was; returns what was done.
    Raises ProposalError (naming the proposal and what to do) otherwise."""
    now = time.time() if now is None else now
    with _locked() as data:
        outcome = _apply_locked(data["proposals"], proposal_id, now)
    if isinstance(outcome, ProposalError):
        raise outcome
    return outcome


def _apply_locked(items: dict[str, dict[str, Any]], proposal_id: str, now: float) -> str | ProposalError:
    """Apply under the proposals' lock; a refusal is returned, not raised, so the lock's holder
    writes the status it sets."""
    entry = items.get(proposal_id)
    if entry is None:
        return ProposalError(f"no proposal {proposal_id!r}; list them with: hermes-editor skills proposals")
    stored = StoredProposal.of(entry)
    if stored.status != "pending":
        return ProposalError(
            f"proposal {stored.id} was {stored.status}{_when(stored.decided_at)}; nothing was done.{_rerun(stored.status)}"
        )
    pinned = [n for n in (stored.name, stored.into) if n and stored.action != "consolidate" and is_pinned(n)]
    if pinned or fingerprint(stored.proposal) != stored.fingerprint:
        entry |= {"status": "stale", "decided_at": now}
        what = f"{pinned[0]} was pinned" if pinned else f"{_subject(stored)} changed"
        return ProposalError(
            f"proposal {stored.id} is stale: {what} since the curator proposed it; nothing was done. "
            "Run the curator again: hermes-editor skills curate"
        )
    try:
        result = _consolidate(stored) if stored.action == "consolidate" else carry_out(stored.proposal)
    except (skills.SkillError, OSError) as exc:
        return ProposalError(f"proposal {stored.id} could not be applied: {exc}")
    entry |= {"status": "applied", "decided_at": now, "result": result}
    return result


def reject(proposal_id: str, *, now: float | None = None) -> StoredProposal:
    """Drop one pending proposal; it is not proposed again while what it would change stays as it is."""
    now = time.time() if now is None else now
    with _locked() as data:
        entry = data["proposals"].get(proposal_id)
        problem = None
        if entry is None:
            problem = f"no proposal {proposal_id!r}; list them with: hermes-editor skills proposals"
        elif entry["status"] != "pending":
            problem = f"proposal {proposal_id} was {entry['status']}{_when(entry.get('decided_at'))}; nothing to reject"
        else:
            entry |= {"status": "rejected", "decided_at": now}
            stored = StoredProposal.of(entry)
    if problem is not None:
        raise ProposalError(problem)
    return stored


def _when(at: float | None) -> str:
    return f" at {time.strftime('%Y-%m-%d %H:%M', time.localtime(at))}" if at else ""


def _rerun(status: str) -> str:
    return "" if status in ("applied", "rejected") else " Run the curator again: hermes-editor skills curate"


def _subject(stored: StoredProposal) -> str:
    if stored.action == "consolidate":
        return FILES.get(stored.name, stored.name)
    return f"{stored.name} or {stored.into}" if stored.into else stored.name


def _consolidate(stored: StoredProposal) -> str:
    """Rewrite a memory file as proposed, under the lock its writers take, if its bytes are still
    those the proposal saw; the previous file is kept in ``memories/backups/``."""
    if stored.name not in FILES or stored.text is None:
        raise OSError(f"proposal {stored.id} names no memory file")
    path = memory_path(stored.name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = _read_all(fd)
        check = hashlib.sha256(b"consolidate")
        check.update(raw)
        if check.hexdigest() != stored.fingerprint:
            raise OSError(f"{FILES[stored.name]} changed as it was being applied; run the curator again")
        if usable_rewrite(stored.name, raw.decode("utf-8", errors="replace"), stored.text) != stored.text:
            raise OSError(f"the proposed {FILES[stored.name]} is no longer a usable rewrite (screening); run the curator again")
        backups = path.parent / "backups"
        backups.mkdir(mode=0o700, exist_ok=True)
        backup = backups / f"{FILES[stored.name]}.{time.strftime('%Y%m%d-%H%M%S')}-{stored.id}"
        kept = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            _write_all(kept, raw)
            os.fsync(kept)
        finally:
            os.close(kept)
        data = stored.text.encode("utf-8")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    before = raw.decode("utf-8", errors="replace")
    journal_change("curator", stored.name, "consolidate", before, stored.text)
    return f"consolidated {FILES[stored.name]}: {len(before)} -> {len(stored.text)} characters; the previous file is kept as {backup}"


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
