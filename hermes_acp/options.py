"""Session config options (model, mode, thought level) and the legacy ``modes`` field."""

from __future__ import annotations

from dataclasses import dataclass

from core.config import Config, ConfigError

__all__ = ["MODES", "SessionChoices", "config_options", "mode_state", "model_choices"]

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


def model_choices(config: Config) -> list[str]:
    """Models for the picker: the configured one, fallbacks, and each provider's ``models`` list."""
    labels: list[str] = []
    for spec in [config.model, *config.fallback_models]:
        if not spec:
            continue
        try:
            ref = config.model_ref(spec)
        except ConfigError:
            continue
        labels.append(ref.label)
    for name, provider in config.providers.items():
        labels.extend(f"{name}:{model}" for model in provider.models)
    return list(dict.fromkeys(labels))


def thought_levels(config: Config, model: str) -> tuple[str, ...]:
    profile = config.profile(model)
    return profile.reasoning_levels if profile else ()


def config_options(config: Config, choices: SessionChoices) -> list:
    from acp.schema import SessionConfigOptionSelect, SessionConfigSelectOption

    models = model_choices(config)
    if choices.model not in models:
        models.insert(0, choices.model)
    options = [
        SessionConfigOptionSelect(
            type="select",
            id="model",
            name="Model",
            category="model",
            current_value=choices.model,
            options=[SessionConfigSelectOption(value=m, name=m) for m in models],
        ),
        SessionConfigOptionSelect(
            type="select",
            id="mode",
            name="Mode",
            category="mode",
            current_value=choices.mode,
            options=[SessionConfigSelectOption(value=k, name=n, description=d) for k, (n, d) in MODES.items()],
        ),
    ]
    levels = thought_levels(config, choices.model)
    if levels:
        options.append(
            SessionConfigOptionSelect(
                type="select",
                id="thought_level",
                name="Thinking",
                category="thought_level",
                current_value=choices.thought_level if choices.thought_level in levels else DEFAULT_THOUGHT,
                options=[SessionConfigSelectOption(value=DEFAULT_THOUGHT, name="Default")]
                + [SessionConfigSelectOption(value=level, name=level.capitalize()) for level in levels],
            )
        )
    return options


def mode_state(mode: str):
    from acp.schema import SessionMode, SessionModeState

    return SessionModeState(
        current_mode_id=mode,
        available_modes=[SessionMode(id=k, name=n, description=d) for k, (n, d) in MODES.items()],
    )
