"""undo: the model's way back. Restores the files of the newest checkpoint of this session."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from core.host.checkpoints import Checkpoints
from core.host.text_files import BinaryFileError, decode_text
from core.messages import FileDiff
from core.tools.context import ToolContext
from core.tools.diffs import display_diff
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool

__all__ = ["undo"]


class UndoArgs(BaseModel):
    force: bool = Field(default=False, description="also overwrite files changed since that turn")


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return decode_text(data).text
    except BinaryFileError:
        return f"<binary file: {len(data)} bytes>"


@tool(kind="edit", read_only=False, title=lambda a: "Undo the last turn's file changes")
async def undo(ctx: ToolContext, args: UndoArgs) -> ToolOutput:
    """Undo the newest turn's file changes: files restored, created ones removed, deleted ones back."""
    store = ctx.checkpoints or Checkpoints()
    checkpoint, rows, conflicts = await store.preview_undo(ctx.session_id)
    if checkpoint is None:
        return ToolOutput("Nothing to undo: no file changes are recorded for this session.")
    if conflicts and not args.force:
        raise ToolError(
            "These files changed after that turn wrote them, and undo would overwrite the change: "
            f"{', '.join(conflicts)}. Ask the user, then call undo with force=true if they agree."
        )
    diffs: list[FileDiff] = []
    for path, current, restored in rows:
        old, new = _text(current), _text(restored)
        if old != new:
            diffs.append(display_diff(path, old, new if new is not None else ""))
    await ctx.approve_change("Undo the last turn's changes", diffs, [Path(p) for p, _, _ in rows])
    try:
        report = await store.undo_last(ctx.session_id, force=args.force, expect=checkpoint.id)
    except RuntimeError as exc:
        raise ToolError(str(exc)) from None
    assert ctx.files is not None
    for path, _, _ in rows:
        ctx.files.forget(path)  # the model must read them again before changing them
    return ToolOutput(report.summary() + "\nRead the files again before changing them.", diffs=diffs)
