"""Session config options (model, mode, thought level) and the legacy ``modes`` field."""

from __future__ import annotations

from dataclasses import dataclass

from core.config import Config

__all__ = [
    "MODES",
    "SessionChoices",
    "config_options",
    "config_options_json",
    "mode_state",
    "mode_state_json",
]

MODES: dict[str, tuple[str, str]] = {
    "read-only": ("Read only", "Reads and searches; no writes, no commands"),
    "ask": ("Ask", "Reads are free; every write and command asks"),
    "accept-edits": ("Accept edits", "Edits inside the project are free; commands ask"),
    "auto": ("Auto", "Everything inside the project is free except what is dangerous"),
}
DEFAULT_THOUGHT = "default"


@dataclass(slots=True)
class SessionChoices:
    """What the user picked for one session."""

    model: str
    mode: str = "ask"
    thought_level: str = DEFAULT_THOUGHT


def thought_levels(config: Config, model: str) -> tuple[str, ...]:
    profile = config.profile(model)
    return profile.reasoning_levels if profile else ()


def config_options_json(config: Config, choices: SessionChoices) -> list[dict]:
    """The session's config options as they go on the wire (camelCase, no nulls)."""
    models = config.model_choices()
    if choices.model not in models:
        models.insert(0, choices.model)

    def select(option_id: str, name: str, current: str, values: list[dict]) -> dict:
        return {"type": "select", "id": option_id, "name": name, "category": option_id, "currentValue": current, "options": values}

    options = [
        select("model", "Model", choices.model, [{"value": m, "name": m} for m in models]),
        select("mode", "Mode", choices.mode, [{"value": k, "name": n, "description": d} for k, (n, d) in MODES.items()]),
    ]
    levels = thought_levels(config, choices.model)
    if levels:
        current = choices.thought_level if choices.thought_level in levels else DEFAULT_THOUGHT
        values = [{"value": DEFAULT_THOUGHT, "name": "Default"}] + [{"value": lv, "name": lv.capitalize()} for lv in levels]
        options.append(select("thought_level", "Thinking", current, values))
    return options


def mode_state_json(mode: str) -> dict:
    """The legacy ``modes`` field as it goes on the wire."""
    return {"currentModeId": mode, "availableModes": [{"id": k, "name": n, "description": d} for k, (n, d) in MODES.items()]}


def config_options(config: Config, choices: SessionChoices) -> list:
    from acp.schema import SessionConfigOptionSelect

    return [SessionConfigOptionSelect.model_validate(option) for option in config_options_json(config, choices)]


def mode_state(mode: str):
    from acp.schema import SessionModeState

    return SessionModeState.model_validate(mode_state_json(mode))
