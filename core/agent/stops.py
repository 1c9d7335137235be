"""How a turn ends early or normally: exceptions that carry the stop reason and what to tell the user."""

from __future__ import annotations

from typing import Literal

from core.events import StopReason

__all__ = ["ModelFinished", "StepLimitReached", "TurnStopped"]

_FINISH_TO_STOP: dict[str, StopReason] = {"length": "max_tokens", "refusal": "refusal"}


class TurnStopped(Exception):
    """The turn ends with ``reason``; ``message``, when set, is shown to the user first."""

    def __init__(self, reason: StopReason, message: str | None = None, level: Literal["info", "warning", "error"] = "warning") -> None:
        super().__init__(message or reason)
        self.reason: StopReason = reason
        self.message = message
        self.level = level


class ModelFinished(TurnStopped):
    """The model answered without calling a tool; its finish reason says how the turn ends."""

    def __init__(self, finish_reason: str) -> None:
        super().__init__(_FINISH_TO_STOP.get(finish_reason, "end_turn"))


class StepLimitReached(TurnStopped):
    """The turn made as many model requests as it may."""

    def __init__(self, max_steps: int) -> None:
        super().__init__("max_turn_requests", f"Stopped after {max_steps} model requests in one turn (max_steps).")
