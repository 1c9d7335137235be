"""What one ``hermes-mcp`` process holds: the agent core (``Backend``), its tasks and the projects it shows."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hermes_mcp.backend import Backend, NotReady
from hermes_mcp.sampling import ClientSampling, SamplingTasks
from hermes_mcp.tasks import TaskManager

if TYPE_CHECKING:
    from core.config import Config
    from core.logs import RedactingFilter
    from core.models.base import Model

__all__ = ["NotReady", "Runtime"]


class Runtime(Backend):
    """Shared state for every request of this process: the backend, the tasks and the projects shown."""

    def __init__(self, redactor: RedactingFilter | None = None, *, allow_auto: bool = False, trust_client_approvals: bool = False) -> None:
        super().__init__(redactor)
        self.allow_auto = allow_auto
        # Whether the client (and so its model) may answer this server's approvals (approval_respond).
        self.trust_client_approvals = trust_client_approvals
        # Projects whose .agents/skills this server shows: its own cwd, and every task's.
        self.projects: list[Path] = [Path.cwd()]
        # With no model configured, the client's model answers where the client offers sampling.
        self.sampling = ClientSampling(self)
        self.tasks: TaskManager = SamplingTasks(
            self, self.sampling, allow_auto=allow_auto, trust_client_approvals=trust_client_approvals, on_project=self.add_project
        )

    def stand_in_model(self, config: Config | None) -> Model | None:
        return self.sampling.stand_in(config)

    def allowed_projects(self, client_roots: list[Path]) -> list[Path]:
        """Folders tasks may work in: the client's roots and ``[mcp] projects`` (read afresh)."""
        from hermes_mcp.projects import allowed_projects

        config = self.load_config()
        return allowed_projects(client_roots, config.mcp.projects if config else [])

    def add_project(self, path: Path) -> None:
        if path not in self.projects:
            self.projects.append(path)

    async def aclose(self) -> None:
        """Stop running tasks, then release the model client and the store."""
        await self.tasks.aclose()
        await super().aclose()
