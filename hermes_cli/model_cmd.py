"""``hermes-editor model [PROVIDER:MODEL]``: list the configured models, or set the ``model`` key.

The choices are the configured model, the fallbacks, and each provider's ``models`` list. On a
terminal the listing lets the user pick one by number. Setting edits the one key in
config.toml, keeping the rest of the file with its comments and order, and only to a model
that resolves to a configured provider.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_cli.json_out import add_json_flag, emit

if TYPE_CHECKING:
    from core.config import Config

__all__ = ["register", "run"]

_ENV = "HERMES_MODEL"


@dataclass(frozen=True, slots=True)
class _Choice:
    label: str  # provider:model
    source: str  # where it is configured: "model", "fallback_models", "providers.NAME.models"


class _Refused(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``model`` subcommand."""
    model = commands.add_parser(
        "model",
        help="list the configured models, or set the default one",
        description="Without an argument, list the configured models (the current one marked with *); on a "
        "terminal, pick one by number. With PROVIDER:MODEL, set config.toml's model key to it, keeping the "
        "rest of the file. HERMES_MODEL, when set, overrides the key for every surface.",
    )
    model.add_argument("model", nargs="?", metavar="PROVIDER:MODEL", help="the model to make the default, e.g. openai:gpt-4.1")
    add_json_flag(model)


def run(args: argparse.Namespace) -> int:
    from core.config import config_path

    path = config_path()
    try:
        if args.model:
            if args.json:
                raise _Refused("--json goes with the listing (hermes-editor model --json), not with setting a model.", 2)
            return _set(path, args.model)
        return _list(path, as_json=args.json)
    except _Refused as exc:
        print(exc, file=sys.stderr)
        return exc.code


def _env_without_override() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != _ENV}


def _load(path: Path) -> Config:
    from core.config import ConfigError, load_config

    try:
        return load_config(path, env=_env_without_override())
    except ConfigError as exc:
        raise _Refused(f"The configuration has a problem: {exc}") from None


def _choices(config: Config) -> list[_Choice]:
    from core.config import ConfigError

    found: dict[str, _Choice] = {}

    def add(spec: str, source: str) -> None:
        try:
            ref = config.model_ref(spec)
        except ConfigError:
            return
        if ref is not None and ref.label not in found:
            found[ref.label] = _Choice(ref.label, source)

    if config.model:
        add(config.model, "model")
    for spec in config.fallback_models:
        add(spec, "fallback_models")
    for name, provider in config.providers.items():
        for model in provider.models:
            add(f"{name}:{model}", f"providers.{name}.models")
    return list(found.values())


def _current(config: Config) -> str | None:
    from core.config import ConfigError

    try:
        ref = config.model_ref()
    except ConfigError:
        return config.model
    return ref.label if ref else None


def _list(path: Path, *, as_json: bool) -> int:
    config = _load(path)
    choices = _choices(config)
    current = _current(config)
    override = os.environ.get(_ENV)
    if as_json:
        return emit([{"model": c.label, "source": c.source, "current": c.label == current} for c in choices])
    if not choices:
        print("No model is configured. Run 'hermes-editor setup', or set one: hermes-editor model PROVIDER:MODEL")
        return 0
    for number, choice in enumerate(choices, 1):
        mark = "*" if choice.label == current else " "
        print(f"{mark} {number:>2}  {choice.label:<40} {choice.source}")
    if current is None:
        print("No default model is set (the key 'model' in config.toml).")
    if override:
        print(f"{_ENV}={override} is set: it overrides the default for every surface started from this environment.")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return 0
    try:
        answer = input(f"Pick a number to make it the default (Enter keeps {current or 'none'}): ").strip()
    except (EOFError, KeyboardInterrupt):
        print()
        return 0
    if not answer:
        return 0
    if not answer.isdigit() or not 1 <= int(answer) <= len(choices):
        raise _Refused(f"{answer!r} is not one of the numbers 1 to {len(choices)}; nothing changed.", 2)
    return _set(path, choices[int(answer) - 1].label)


def _set(path: Path, spec: str) -> int:
    import tomlkit
    from tomlkit.exceptions import ParseError

    from core.config import ConfigError, load_config
    from surface_support.setup_wizard import write_private_atomic

    spec = spec.strip()
    document: Any
    if path.exists():
        try:
            document = tomlkit.parse(path.read_text(encoding="utf-8"))
        except ParseError as exc:
            raise _Refused(f"{path} is not valid TOML ({exc}). Fix the syntax or run 'hermes-editor setup'.") from None
        except OSError as exc:
            raise _Refused(f"{path} cannot be read ({exc.strerror}).") from None
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        document = tomlkit.document()
    document["model"] = spec
    resolved: list[str] = []

    def validate(candidate: Path) -> None:
        try:
            config = load_config(candidate, env=_env_without_override())
            ref = config.model_ref()
        except ConfigError as exc:
            raise _Refused(f"Not changed: {str(exc).replace(str(candidate), str(path))}") from None
        if ref is None:  # pragma: no cover - a non-empty model always resolves or raises
            raise _Refused(f"Not changed: {spec!r} names no model.")
        resolved.append(ref.label)

    write_private_atomic(path, tomlkit.dumps(document), validate=validate)
    label = resolved[0] if resolved else spec
    print(f"Default model: {label}  (model = {spec!r} in {path})")
    if os.environ.get(_ENV):
        print(f"Note: {_ENV}={os.environ[_ENV]} is set and overrides it where this environment starts a surface.")
    return 0
