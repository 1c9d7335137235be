"""The demo's editor stand-in: the terminal ACP client, with the file system confined to the throwaway project.

Approvals are answered automatically for the scripted model, or asked y/n on the terminal
(``interactive``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hermes_cli.acp_terminal import Console, TerminalClient

if TYPE_CHECKING:
    from acp.schema import PermissionOption

__all__ = ["Console", "DemoClient"]


class DemoClient(TerminalClient):
    """Prints the session; reads and writes files in the project; approves, or asks when interactive."""

    def __init__(self, console: Console, project: Path, *, interactive: bool = False) -> None:
        super().__init__(console, project, fs=True)
        self.interactive = interactive

    async def answer(self, options: list[PermissionOption]) -> str:
        if not self.interactive:
            return "allow_once"
        always = self.choose(options, "allow_always") is not None
        reply = (await self.console.ask("    Allow? [y/N] (a = always) " if always else "    Allow? [y/N] ")).strip().lower()
        if always and reply in ("a", "always"):
            return "allow_always"
        return "allow_once" if reply in ("y", "yes") else "reject_once"
