"""How a tool fails: an error the model reads and can act on, or a refusal."""

from __future__ import annotations

__all__ = ["ToolError", "ToolRejected"]


class ToolError(Exception):
    """A failure the model should read and can act on."""


class ToolRejected(ToolError):
    """The user (or the policy) said no."""
