"""``hermes-editor config [show | get KEY | set KEY VALUE | path]``: read and edit config.toml.

``show`` (the default) and ``get`` never print a secret. ``set`` edits one key in place, keeping
the rest of the file with its comments and order, and writes only a file the loader accepts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hermes_cli.json_out import add_json_flag

__all__ = ["register", "run"]

# Key names that hold credentials: their string values are never printed.
_SECRET_WORDS = ("key", "token", "secret", "password", "authorization", "credential")
# Tables whose every string value may be a credential (an MCP server's environment and headers).
_SECRET_TABLES = ("env", "headers")
# What a hidden value shows as: short enough that the credential-shape redaction leaves "key = ***" readable.
HIDDEN = "***"
_JSON_HELP = 'print the configuration in effect (config.toml, the environment, the defaults) as one JSON object; secrets are "set" or null'


class _Refused(Exception):
    """A request that cannot be done; the message says why. ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``config`` subcommand (bare ``config`` shows the configuration)."""
    config = commands.add_parser(
        "config",
        help="show, read or edit config.toml (secrets are never shown)",
        description="Show, read or edit config.toml. Keys are dotted: providers.openai.base_url. "
        "'set' keeps the file's comments and order and refuses a value the configuration would reject.",
    )
    add_json_flag(config, _JSON_HELP)
    actions = config.add_subparsers(dest="action", metavar="ACTION")
    add_json_flag(actions.add_parser("show", help="the configuration with secrets hidden (the default)"), _JSON_HELP)
    get = actions.add_parser("get", help="one value, by dotted key")
    get.add_argument("key", help="a dotted key, e.g. providers.openai.base_url")
    set_ = actions.add_parser("set", help="set one value, keeping the rest of the file")
    set_.add_argument("key", help="a dotted key, e.g. providers.openai.base_url")
    set_.add_argument("value", help='a TOML literal (42, true, ["a"]) or else a plain string')
    actions.add_parser("path", help="the path of config.toml")


def run(args: argparse.Namespace) -> int:
    from core.config import config_path

    path = config_path()
    try:
        if args.action == "path":
            print(path)
            return 0
        if args.action in (None, "show") and getattr(args, "json", False):
            return _show_json(path)
        if args.action in (None, "show"):
            return _show(path)
        if args.action == "get":
            return _get(path, args.key)
        return _set(path, args.key, args.value)
    except _Refused as exc:
        print(exc, file=sys.stderr)
        return exc.code


def _read(path: Path) -> Any:
    """The parsed document (a tomlkit document), or _Refused naming the problem."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _Refused(f"No configuration yet: {path} does not exist. Run 'hermes-editor setup'.") from None
    except OSError as exc:
        raise _Refused(f"{path} cannot be read ({exc.strerror}).") from None
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise _Refused(f"{path} is not valid TOML ({exc}). Fix the syntax or run 'hermes-editor setup'.") from None


def _is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _hide_secrets(node: Any, *, all_strings: bool = False) -> None:
    """Replace the secret string values in a tomlkit container, in place (comments and order stay)."""
    for name in list(node.keys()):
        value = node[name]
        if hasattr(value, "keys"):
            _hide_secrets(value, all_strings=all_strings or name.lower() in _SECRET_TABLES)
        elif isinstance(value, str) and (all_strings or _is_secret(name)):
            node[name] = HIDDEN
        elif isinstance(value, list):
            for item in value:
                if hasattr(item, "keys"):
                    _hide_secrets(item, all_strings=all_strings)


def _show(path: Path) -> int:
    import tomlkit

    from hermes_cli.redact import redact

    if not path.exists():
        print(f"No configuration yet ({path} does not exist). Run 'hermes-editor setup'.")
        return 0
    document = _read(path)
    _hide_secrets(document)
    print(redact(tomlkit.dumps(document)).rstrip("\n"))
    return 0


def _show_json(path: Path) -> int:
    """The configuration in effect as one JSON object: secrets are "set" or null, never their value."""
    import json

    from core.config import ConfigError, load_config

    try:
        config = load_config()
    except ConfigError as exc:
        raise _Refused(f"The configuration does not load: {exc}") from None
    sys.stdout.write(json.dumps(_public(config.model_dump()), ensure_ascii=False, indent=2) + "\n")
    return 0


def _public(value: Any, name: str = "", *, all_strings: bool = False) -> Any:
    """``value`` (a model_dump) as JSON data: every secret is "set" (or null when unset), every other string redacted."""
    from pathlib import PurePath

    from pydantic import SecretStr

    from hermes_cli.redact import redact

    secret = all_strings or _is_secret(name)
    if isinstance(value, SecretStr):
        return "set"
    if isinstance(value, dict):
        inner = all_strings or name.lower() in _SECRET_TABLES
        return {str(key): _public(item, str(key), all_strings=inner) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_public(item, all_strings=all_strings) for item in value]
    if isinstance(value, str | PurePath):
        return "set" if secret else redact(str(value))
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(str(value))


def _split(key: str) -> list[str]:
    parts = [part.strip() for part in key.split(".")]
    if not all(parts):
        raise _Refused(f"'{key}' is not a dotted key such as providers.openai.base_url.", code=2)
    return parts


def _get(path: Path, key: str) -> int:
    import tomlkit

    from hermes_cli.redact import redact

    parts = _split(key)
    document = _read(path)
    node: Any = document
    for depth, part in enumerate(parts):
        if not hasattr(node, "keys") or part not in node:
            where = ".".join(parts[:depth]) or "the top level"
            raise _Refused(f"'{key}' is not set in {path} (no '{part}' under {where}).")
        node = node[part]
    if hasattr(node, "keys"):
        _hide_secrets(node, all_strings=parts[-1].lower() in _SECRET_TABLES)
        print(redact(tomlkit.dumps(node.unwrap())).rstrip("\n"))
    elif isinstance(node, str):
        print(HIDDEN if _is_secret(parts[-1]) or any(p.lower() in _SECRET_TABLES for p in parts[:-1]) else redact(str(node)))
    else:
        print(redact(node.as_string().strip()))
    return 0


def _literal(text: str) -> Any:
    """``text`` as a TOML value when it parses as one (42, true, [1, 2], "quoted"), else the string itself."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(f"value = {text}\n")["value"]
    except ParseError:
        return text


def _set(path: Path, key: str, value: str) -> int:
    import tomlkit

    from core.config import ConfigError, load_config
    from surface_support.setup_wizard import write_private_atomic

    parts = _split(key)
    document = _read(path) if path.exists() else tomlkit.document()
    node: Any = document
    for depth, part in enumerate(parts[:-1]):
        if part not in node:
            node[part] = tomlkit.table(is_super_table=depth + 1 < len(parts) - 1)
        node = node[part]
        if not hasattr(node, "keys"):
            raise _Refused(f"Cannot set '{key}': '{'.'.join(parts[: depth + 1])}' is a value, not a table.")
    if hasattr(node.get(parts[-1]), "keys"):
        raise _Refused(f"Cannot set '{key}': it is a table; set the keys inside it (e.g. {key}.NAME).")
    node[parts[-1]] = _literal(value)

    def validate(candidate: Path) -> None:
        try:
            load_config(candidate, env={})
        except ConfigError as exc:
            raise _Refused(f"Not changed: {str(exc).replace(str(candidate), str(path))}") from None

    write_private_atomic(path, tomlkit.dumps(document), validate=validate)
    shown = HIDDEN if _is_secret(parts[-1]) else value
    print(f"Set {key} = {shown} in {path}.")
    return 0
