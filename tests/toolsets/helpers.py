"""A session's worth of tool context on the local host: one host, one ledger, one checkpoint store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.events import Decision, PermissionNeeded
from core.host.checkpoints import Checkpoints
from core.host.local import LocalHost
from core.messages import ToolCallPart
from core.policy.approvals import ApprovalBroker, ApprovalPolicy
from core.store import SessionStore
from core.tools.context import ToolContext, ToolSettings
from core.tools.diffs import FileLedger
from core.tools.dispatch import ToolRun, run_tool
from toolsets import toolset

TOOLS = {t.name: t for t in toolset("editor")}


class Session:
    """Tool calls as the agent makes them: same session, a turn id, approvals answered by the test."""

    def __init__(
        self,
        root: Path,
        mode: str = "auto",
        *,
        host=None,
        home: Path | None = None,
        store: SessionStore | None = None,
        settings: ToolSettings | None = None,
    ) -> None:
        self.root = root
        self.events: list = []
        self.broker = ApprovalBroker(None, timeout=5)
        self.policy = ApprovalPolicy(mode=mode, roots=[root.resolve()], home=home)
        self.host = host or LocalHost()
        self.ledger = FileLedger()
        self.checkpoints = Checkpoints()
        self.turn = "turn-1"
        self.calls = 0
        self.store = store
        self.settings = settings or ToolSettings()

    def ctx(self) -> ToolContext:
        async def emit(event) -> None:
            self.events.append(event)

        return ToolContext(
            session_id="session-1",
            cwd=self.root,
            roots=[self.root.resolve()],
            host=self.host,
            policy=self.policy,
            broker=self.broker,
            emit=emit,
            turn_id=self.turn,
            checkpoints=self.checkpoints,
            files=self.ledger,
            store=self.store,
            settings=self.settings,
        )

    async def run(self, name: str, args: dict, *, answer: Decision | None = None, before_answer=None) -> ToolRun:
        """Run one call; a question is answered with ``answer`` (a call that asks without one fails)."""
        self.calls += 1
        call = ToolCallPart(id=f"call-{self.calls}", name=name, arguments=args)
        task = asyncio.create_task(run_tool(TOOLS, call, self.ctx()))
        while not task.done():
            asked = self.requests()
            if asked:
                assert answer is not None, f"{name} asked: {asked[0].title} ({asked[0].reason})"
                if before_answer is not None:
                    before_answer(asked[0])
                self.events = [e for e in self.events if not isinstance(e, PermissionNeeded)]
                self.answered = asked[0]
                await self.broker.answer(asked[0].id, answer, by="test")
            await asyncio.sleep(0.005)
        return task.result()

    def requests(self) -> list:
        return [e.request for e in self.events if isinstance(e, PermissionNeeded)]
