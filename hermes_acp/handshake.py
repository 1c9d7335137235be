"""The first two answers an editor waits for, built without the ACP SDK.

An editor spawns ``hermes-acp``, sends ``initialize`` and then ``session/new``, and shows the
agent as ready once both are answered. Importing the SDK alone takes about a quarter of a second
on a small machine (it builds a few hundred protocol models), so ``hermes-acp`` answers these two
from here while the SDK loads in a background thread. The same requests are then handed to the
SDK connection, whose own answers are dropped, so its state is exactly as if it had answered: the
session is created there under the id given here. Requests the client sends meanwhile wait until
that has happened.

Only well-formed requests are answered here; anything unusual (odd types, a missing directory,
no model configured) is left to the SDK, which answers it with the proper error. The server builds
its own answers from the same functions, and a test checks that both paths answer identically.

Imports only the standard library, the config and the option tables (and, to say whether audio
prompts can be transcribed, ``core.models.speech``, which leaves its SDK unloaded).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.version import version

if TYPE_CHECKING:
    from core.config import Config
    from hermes_acp.options import SessionChoices

__all__ = [
    "PROTOCOL_VERSION",
    "RELOAD_METHOD",
    "SETUP_METHOD",
    "EarlyAnswers",
    "initialize_result",
    "new_session_result",
    "self_command",
]

# The SDK's acp.PROTOCOL_VERSION (a test keeps them equal).
PROTOCOL_VERSION = 1
SETUP_METHOD = "hermes-setup"
RELOAD_METHOD = "hermes-config"


def self_command() -> str:
    """An absolute command that runs this server, for editors that launch set-up themselves."""
    import shutil

    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "hermes-acp"
    if os.sep in argv0:
        return os.path.abspath(argv0)
    return shutil.which(argv0) or argv0


def initialize_result(
    protocol_version: int, *, terminal_auth: bool, images: bool, config_file: Path, audio: bool = False
) -> dict[str, Any]:
    """The ``initialize`` result as it goes on the wire."""
    from core.state_home import profile_name

    # Set-up in a terminal configures this server's profile: editors run it with these args only.
    profile = profile_name()
    setup_args = ["--profile", profile, "--setup"] if profile else ["--setup"]
    methods: list[dict[str, Any]] = []
    if terminal_auth:
        methods.append(
            {
                "type": "terminal",
                "id": SETUP_METHOD,
                "name": "Set up Hermes",
                "description": "Choose a provider, API key and model in a terminal (runs hermes-acp --setup).",
                "args": setup_args,
            }
        )
    methods.append(
        {
            "id": RELOAD_METHOD,
            "name": "Use my config.toml",
            "description": f"Run 'hermes-acp --setup' in a terminal or edit {config_file}, then choose this.",
            "_meta": {"terminal-auth": {"command": self_command(), "args": setup_args, "label": "Set up Hermes"}},
        }
    )
    return {
        "protocolVersion": min(protocol_version, PROTOCOL_VERSION),
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": images, "audio": audio, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "fork": {}},
        },
        "authMethods": methods,
        "agentInfo": {"name": "hermes-editor", "title": "Hermes", "version": version()},
    }


def new_session_result(session_id: str, config: Config, choices: SessionChoices) -> dict[str, Any]:
    """The ``session/new`` result as it goes on the wire."""
    from hermes_acp.options import config_options_json, mode_state_json

    return {"sessionId": session_id, "modes": mode_state_json(choices.mode), "configOptions": config_options_json(config, choices)}


def images_supported(config: Config | None) -> bool:
    """Images are accepted when the configured model's provider takes them, or a vision model
    (``[models] vision``) describes them for it."""
    if config is None or not config.model:
        return False
    profile = config.profile()
    return bool(profile and profile.images) or bool(config.models.vision)


def audio_supported(config: Config | None) -> bool:
    """Audio prompts are accepted when they can be transcribed (``[voice]``, or the openai provider)."""
    if config is None:
        return False
    from core.models.speech import transcription_configured

    return transcription_configured(config)


def not_ready(config: Config | None, config_error: str | None = None) -> str | None:
    """Why a session cannot be created yet (an invalid config, no model, a model that does not
    resolve), or None when it can."""
    from core.config import ConfigError, config_path

    if config_error:
        return config_error
    if config is None or not config.model:
        return (
            f"No model is configured. Run 'hermes-acp --setup' in a terminal, or set model in {config_path()} "
            "(or HERMES_MODEL and a provider key such as OPENAI_API_KEY)."
        )
    try:
        config.model_ref()
    except ConfigError as exc:
        return str(exc)
    return None


def _terminal_auth(capabilities: Any) -> bool | None:
    """The client's ``auth.terminal`` flag; None when the capabilities look malformed."""
    if capabilities is None:
        return False
    if not isinstance(capabilities, dict):
        return None
    auth = capabilities.get("auth")
    if auth is None:
        return False
    if not isinstance(auth, dict):
        return None
    terminal = auth.get("terminal", False)
    return terminal if isinstance(terminal, bool) else None


def _request(line: bytes, method: str) -> tuple[int | str, dict[str, Any]] | None:
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or message.get("method") != method:
        return None
    request_id = message.get("id")
    params = message.get("params")
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)) or not isinstance(params, dict):
        return None
    return request_id, params


@dataclass
class EarlyAnswers:
    """Reads the first requests from stdin and answers ``initialize`` and ``session/new``.

    ``config()`` blocks until the configuration is loaded (in the loader thread) and returns it,
    or None when it is invalid. What was read is kept in ``replay`` (whole lines) and ``rest``
    (bytes after the last whole line), for the SDK connection to read first.
    """

    read_fd: int
    write_fd: int
    config: Callable[[], Config | None]
    replay: list[bytes] = field(default_factory=list)
    rest: bytes = b""
    answered: dict[int | str, dict[str, Any]] = field(default_factory=dict)  # request id -> the result sent
    session_ids: list[str] = field(default_factory=list)  # ids given out for session/new
    eof: bool = False

    def run(self) -> None:
        line = self._read_line()
        if line is None:
            return
        self.replay.append(line)
        request = _request(line, "initialize")
        if request is None:
            return
        request_id, params = request
        protocol_version = params.get("protocolVersion")
        terminal_auth = _terminal_auth(params.get("clientCapabilities"))
        if isinstance(protocol_version, bool) or not isinstance(protocol_version, int) or protocol_version < 0 or terminal_auth is None:
            return
        from core.config import config_path

        config = self.config()
        self._answer(
            request_id,
            initialize_result(
                protocol_version,
                terminal_auth=terminal_auth,
                images=images_supported(config),
                audio=audio_supported(config),
                config_file=config_path(),
            ),
        )

        line = self._read_line()
        if line is None:
            return
        self.replay.append(line)
        request = _request(line, "session/new")
        if request is None or config is None or not_ready(config) is not None or not _session_params_ok(request[1]):
            return
        ref = config.model_ref()
        assert ref is not None, "not_ready() found the model to resolve"
        from hermes_acp.options import SessionChoices

        session_id = uuid.uuid4().hex
        self._answer(request[0], new_session_result(session_id, config, SessionChoices(model=ref.label)))
        self.session_ids.append(session_id)

    def _answer(self, request_id: int | str, result: dict[str, Any]) -> None:
        response = {"jsonrpc": "2.0", "id": request_id, "result": result}
        view = memoryview(json.dumps(response, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
        while view:
            view = view[os.write(self.write_fd, view) :]
        self.answered[request_id] = result

    def _read_line(self) -> bytes | None:
        while b"\n" not in self.rest:
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                self.eof = True
                return None
            self.rest += chunk
            if len(self.rest) > 1024 * 1024 and b"\n" not in self.rest:
                return None  # a huge first line: not a handshake; the SDK transport deals with it
        line, self.rest = self.rest.split(b"\n", 1)
        return line + b"\n"


def _session_params_ok(params: dict[str, Any]) -> bool:
    """True for a ``session/new`` the server will accept (the checks of its ``_check_cwd``)."""
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not isinstance(params.get("mcpServers"), list):
        return False
    extra = params.get("additionalDirectories")
    if extra is None:
        extra = []
    if not isinstance(extra, list) or not all(isinstance(d, str) for d in extra):
        return False
    paths = [Path(cwd), *(Path(d) for d in extra)]
    return all(p.is_absolute() and p.is_dir() for p in paths)
