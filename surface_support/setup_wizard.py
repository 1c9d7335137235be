"""Interactive set-up: choose a provider, key and model; write a valid config.toml.

For a local or other OpenAI-compatible server the models it reports are offered by number
(``GET {base_url}/models``, or Ollama's native ``/api/tags``); when it cannot be reached, the
model is typed. A second run merges into the existing file: only the keys it asks about
change; every other table and key, and the comments, stay.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.config import PROFILES, ConfigError, config_path, load_config

__all__ = ["ModelListError", "list_server_models", "merge_config", "read_secret", "render_config", "run_setup", "write_private_atomic"]

_CHOICES = [
    ("openai", "OpenAI", "gpt-4.1-mini"),
    ("anthropic", "Anthropic", "claude-sonnet-4-5"),
    ("openrouter", "OpenRouter", "anthropic/claude-sonnet-4.5"),
    ("ollama", "Ollama (local)", "qwen3:8b"),
    ("lmstudio", "LM Studio (local)", "local-model"),
    ("openai-compatible", "Another OpenAI-compatible server (vLLM, llama.cpp, ...)", ""),
]


# Providers whose server is asked for its models; the others' catalogues are too long to list.
_LISTS_MODELS = ("ollama", "lmstudio", "openai-compatible")
# At most this many models are offered by number; a longer list is cut, and any name may be typed.
_MAX_OFFERED = 60


class ModelListError(Exception):
    """A server's model list could not be had; the message says why, without any key."""


def list_server_models(base_url: str, api_key: str | None = None, *, timeout: float = 5.0) -> list[str]:
    """The model names an OpenAI-compatible server reports at ``GET {base_url}/models``, or, when that
    route is missing, an Ollama server at ``GET /api/tags`` (beside its ``/v1``); sorted, no duplicates.

    Raises ModelListError when neither answers with a list.
    """
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = base_url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    attempts = [(f"{base}/models", "data", "id"), (f"{root}/api/tags", "models", "name")]
    problems: list[str] = []
    try:
        with httpx.Client(timeout=timeout, headers=headers, follow_redirects=True) as client:
            for url, field, key in attempts:
                try:
                    response = client.get(url)
                except httpx.HTTPError as exc:
                    # Nothing listens, or the name does not resolve: the fallback would fail the same way.
                    raise ModelListError(f"cannot reach {base}: {_reason(exc)}") from None
                if response.status_code in (401, 403):
                    raise ModelListError(f"{url} refused the request (HTTP {response.status_code}): check the API key")
                if response.status_code != 200:
                    problems.append(f"{url}: HTTP {response.status_code}")
                    continue
                try:
                    entries = response.json()[field]
                    names = {str(entry[key]) for entry in entries if isinstance(entry, dict) and entry.get(key)}
                except (ValueError, KeyError, TypeError):
                    problems.append(f"{url}: not a model list")
                    continue
                return sorted(names)
    except httpx.InvalidURL as exc:
        raise ModelListError(f"{base_url!r} is not a usable URL ({exc})") from None
    raise ModelListError("; ".join(problems))


def _reason(exc: Exception) -> str:
    import httpx

    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host not found"
    if isinstance(exc, httpx.TimeoutException):
        return "no answer in time"
    return type(exc).__name__


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def render_config(provider: str, model: str, api_key: str | None, base_url: str | None) -> str:
    """The text of a minimal config.toml for one provider."""
    name = "custom" if provider == "openai-compatible" else provider
    lines = [
        "# hermes-editor configuration. Reference: the README's Configuration section.",
        f"model = {_toml_str(f'{name}:{model}')}",
        "",
        f"[providers.{name}]",
    ]
    if provider == "openai-compatible":
        lines.append('profile = "openai-compatible"')
    if api_key:
        lines.append(f"api_key = {_toml_str(api_key)}")
    if base_url:
        lines.append(f"base_url = {_toml_str(base_url)}")
    return "\n".join(lines) + "\n"


def merge_config(existing: str, provider: str, model: str, api_key: str | None, base_url: str | None) -> str:
    """``existing`` config.toml text with the model and one provider's answers set, all else kept.

    Raises tomlkit's ParseError when ``existing`` is not valid TOML.
    """
    import tomlkit

    name = "custom" if provider == "openai-compatible" else provider
    document = tomlkit.parse(existing)
    document["model"] = f"{name}:{model}"
    providers: Any = document.get("providers")
    if providers is None:
        providers = document["providers"] = tomlkit.table(is_super_table=True)
    entry: Any = providers.get(name)
    if entry is None:
        entry = providers[name] = tomlkit.table()
    if provider == "openai-compatible":
        entry["profile"] = "openai-compatible"
    if api_key:
        entry["api_key"] = api_key
    if base_url:
        entry["base_url"] = base_url
    return tomlkit.dumps(document)


def read_secret(prompt: str) -> str:
    """A secret from the terminal without echo; from stdin when stdin is not a terminal.

    getpass reads /dev/tty, not stdin, so a script or test piping its answers would hang or
    be skipped; piped input is never echoed anyway.
    """
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(prompt)
    return input(prompt)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by the owner only, also when the file already existed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # O_CREAT's mode only applies to a new file
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_private_atomic(path: Path, text: str, validate: Callable[[Path], None] | None = None) -> None:
    """Replace ``path`` with ``text`` at once, readable by the owner only (the state home's file mode).

    The text goes to a temporary file beside ``path`` first; ``validate`` may check that file and
    raise, and then ``path`` is left as it was.
    """
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temporary = Path(name)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if validate is not None:
            validate(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def run_setup(ask: Callable[[str], str] = input, ask_secret: Callable[[str], str] = read_secret, out=print) -> int:
    """Ask, write config.toml (mode 0600, keeping a backup of any old one) and validate it."""
    try:
        return _run_setup(ask, ask_secret, out)
    except EOFError:
        out("\nThe input ended before set-up was complete; nothing was written.")
        return 2
    except KeyboardInterrupt:
        out("\nSet-up cancelled; nothing was written.")
        return 130


def _choose_model(base_url: str, api_key: str | None, default_model: str, ask: Callable[[str], str], out) -> str:
    """Offer the server's models by number; a typed name is taken as it is."""
    from core.redaction import scrub

    out(f"Asking {base_url} for its models...")
    try:
        models = list_server_models(base_url, api_key)
    except ModelListError as exc:
        out(scrub(f"Could not list the server's models ({exc}). Type the model name; 'hermes-editor doctor' checks the server later."))
        return ask(f"Model [{default_model}]: ").strip() or default_model
    if not models:
        out("The server reports no models (Ollama: 'ollama pull NAME' fetches one). Type the model name.")
        return ask(f"Model [{default_model}]: ").strip() or default_model
    offered = models[:_MAX_OFFERED]
    out(f"The server has {len(models)} model{'s' if len(models) != 1 else ''}:")
    for number, name in enumerate(offered, 1):
        out(f"  {number}. {name}")
    if len(models) > len(offered):
        out(f"  ... and {len(models) - len(offered)} more: type a name to use one of them.")
    default = offered.index(default_model) + 1 if default_model in offered else 1
    while True:
        answer = ask(f"Model (a number, or a name) [{default}]: ").strip() or str(default)
        if not answer.isdigit() or answer in models:
            return answer
        if 1 <= int(answer) <= len(offered):
            return offered[int(answer) - 1]
        out(f"'{answer}' is not one of 1-{len(offered)}; give a number from the list or a model name.")


def _configured_key(provider: str) -> str | None:
    """The API key config.toml already holds for ``provider``, if it loads and holds one."""
    name = "custom" if provider == "openai-compatible" else provider
    try:
        entry = load_config(env={}).providers.get(name)
    except ConfigError:
        return None
    return entry.api_key.get_secret_value() if entry is not None and entry.api_key is not None else None


def _run_setup(ask: Callable[[str], str], ask_secret: Callable[[str], str], out) -> int:
    path = config_path()
    out(f"Setting up hermes-editor. The configuration will be written to {path}.")
    for number, (_, label, _) in enumerate(_CHOICES, 1):
        out(f"  {number}. {label}")
    choice = ask("Provider [1]: ").strip() or "1"
    if not choice.isdigit() or not 1 <= int(choice) <= len(_CHOICES):
        out(f"'{choice}' is not one of 1-{len(_CHOICES)}; nothing was written.")
        return 2
    provider, label, default_model = _CHOICES[int(choice) - 1]
    profile = PROFILES[provider]
    base_url = None
    if provider in ("ollama", "lmstudio", "openai-compatible"):
        default_url = profile.base_url or ""
        base_url = ask(f"Base URL [{default_url}]: ").strip() or default_url
        if not base_url:
            out("A base URL is needed for this provider; nothing was written.")
            return 2
    api_key = None
    if provider == "openai-compatible":
        keep = "Enter keeps the configured one" if _configured_key(provider) else "Enter for none"
        api_key = ask_secret(f"API key for this server ({keep}): ").strip() or None
    elif profile.needs_key:
        from_env = os.environ.get(profile.key_env or "")
        prompt = f"{label} API key" + (f" (Enter to use ${profile.key_env} at run time)" if from_env else "") + ": "
        api_key = ask_secret(prompt).strip() or None
        if not api_key and not from_env:
            out(f"An API key is needed for {label}; nothing was written.")
            return 2
    if provider in _LISTS_MODELS and base_url:
        # Enter keeps a key configured before (the merge leaves it); the listing needs it too.
        model = _choose_model(base_url, api_key or _configured_key(provider), default_model, ask, out)
    else:
        model = ask(f"Model [{default_model}]: ").strip() or default_model
    if not model:
        out("A model name is needed; nothing was written.")
        return 2
    text = render_config(provider, model, api_key, base_url)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.exists():
        previous = path.read_text(encoding="utf-8")
        backup = path.with_suffix(".toml.bak")
        _write_private(backup, previous)
        out(f"The previous configuration was kept as {backup}.")
        from tomlkit.exceptions import ParseError

        try:
            text = merge_config(previous, provider, model, api_key, base_url)
            out("Your other settings were kept.")
        except ParseError:
            out("The previous configuration was not valid TOML; a new one replaces it.")
    write_private_atomic(path, text)
    try:
        config = load_config(Path(path))
        config.model_ref()
    except ConfigError as exc:
        out(f"The configuration was written but does not validate: {exc}")
        return 1
    out(f"Wrote {path}. Model: {config.model}. Run 'hermes-editor doctor' to check the model is reachable.")
    return 0
