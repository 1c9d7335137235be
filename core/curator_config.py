"""The ``[curator]`` settings: the scheduled job that proposes tidying the agent's skills and memory.

Kept apart and importing only pydantic (croniter when a schedule is checked), so that
:mod:`core.config` can hold it as a field without importing the store.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["CuratorSettings", "check_curator_schedule"]

# What ``core.store.schedule.parse_schedule`` reads as a repeating interval (a one-off time makes no curator).
_CHAT = re.compile(r"-?[0-9]+|[a-z]+:\S.*:[^:\s]+")
_EVERY = re.compile(r"^every\s+[1-9][0-9]*\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|d|days?|w|weeks?)$")


def check_curator_schedule(text: str) -> str:
    """``text`` when it is a repeating schedule: 5 cron fields or ``every N`` with a unit; ValueError otherwise."""
    raw = " ".join(text.strip().split())
    if _EVERY.match(raw.lower()):
        return raw
    if len(raw.split(" ")) == 5:
        from croniter import croniter

        if croniter.is_valid(raw):
            return raw
    raise ValueError(f'{text!r} is not a repeating schedule: write 5 cron fields ("0 9 * * 1": Mondays at 09:00) or "every 7d"')


class CuratorSettings(BaseModel):
    """The ``[curator]`` table of config.toml: when the curator runs, with which model, where it reports."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True, description="run the curator as a scheduled job inside hermes-gateway (weekly by default; false turns it off)"
    )
    schedule: str = Field(default="0 9 * * 1", description='5 cron fields or "every 7d", in [cron] timezone (default: Mondays 09:00)')
    model: str | None = Field(
        default=None, description='"provider:model" of a cheap model to judge skills and rewrite memory; unset: heuristics'
    )
    unused_days: float = Field(default=30.0, gt=0, description="an agent-written skill unused this long is proposed for archiving")
    similarity: float = Field(default=0.8, gt=0, le=1, description="name and description this alike: two skills are proposed for merging")
    memory_full: float = Field(default=0.85, gt=0, le=1, description="share of a memory file's budget that counts as near full")
    chat: str | None = Field(
        default=None, description="chat its reports go to (platform:chat:thread, or a Telegram chat id); default: the owner's Telegram chat"
    )

    @field_validator("schedule")
    @classmethod
    def _repeating(cls, text: str) -> str:
        return check_curator_schedule(text)

    @field_validator("chat")
    @classmethod
    def _place(cls, text: str | None) -> str | None:
        if text is not None and not _CHAT.fullmatch(text.strip()):
            raise ValueError(
                f"{text!r} is not a chat: write platform:chat:thread (thread 0 for none, e.g. discord:123:0) or a Telegram chat id"
            )
        return text
