"""What the gateway's parts share: the configured projects."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.store import SessionRecord, SessionStore

__all__ = ["Projects"]


class Projects:
    """The configured projects (name -> resolved path) and the sessions that belong to them."""

    def __init__(self, paths: dict[str, str], store: SessionStore) -> None:
        self.paths = paths
        self._store = store

    def project_of(self, cwd: str) -> str | None:
        """The configured project a path belongs to, if any."""
        path = Path(cwd).resolve()
        for name, root in self.paths.items():
            if path == Path(root) or Path(root) in path.parents:
                return name
        return None

    async def sessions(self, limit: int = 10) -> list[SessionRecord]:
        """Recent sessions of the configured projects, from every surface, newest first."""
        found: dict[str, SessionRecord] = {}
        for record in await self._store.list_sessions(limit=500):
            if self.project_of(record.cwd) is not None and record.id not in found:
                found[record.id] = record
        return sorted(found.values(), key=lambda r: r.updated_at, reverse=True)[:limit]
