"""``hermes-editor doctor``: one line per check, and for every failure what to do about it.

The checks only read, with two exceptions any surface would also make: the state home is
created if missing, and opening the store creates or migrates ``state.db``. And one repair:
whatever in the state home other users could read is made private, each change listed. The
model check sends exactly one tiny request. No API key is ever printed: every line goes through
the same redaction the logs use.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.config import Config, ConfigError, ProjectConfig, config_path, home, load_config
from core.logs import RedactingFilter
from core.redaction import SECRET_ENV_VARS

__all__ = ["Check", "run_doctor"]

MIN_PYTHON = (3, 11)
SETUP_HINT = (
    "Run 'hermes-editor setup', or set HERMES_MODEL=provider:model with a key such as OPENAI_API_KEY "
    "(or ANTHROPIC_API_KEY, OPENROUTER_API_KEY)."
)


@dataclass(slots=True)
class Check:
    """The outcome of one check. ``ok`` is None when the check was skipped."""

    ok: bool | None
    text: str
    fix: str | None = None
    required: bool = True


def run_doctor(*, timeout: float = 30.0, out: Callable[[str], None] = print) -> int:
    """Run every check and print it; 0 when all required checks pass, 1 otherwise."""
    return asyncio.run(_doctor(timeout, out))


async def _doctor(timeout: float, out: Callable[[str], None]) -> int:
    redactor = RedactingFilter([v for k, v in os.environ.items() if k in SECRET_ENV_VARS])
    redactor.add(_raw_secrets(config_path()))

    def show(check: Check) -> None:
        mark = {True: "✓", False: "✗", None: "·"}[check.ok]
        suffix = " (optional)" if not check.required and check.ok is False else ""
        out(redactor.redact(f"  {mark} {check.text}{suffix}"))
        if check.ok is False and check.fix:
            out(redactor.redact(f"      → {check.fix}"))

    from core.state_home import profile_name

    profile = profile_name()
    out(f"hermes-editor doctor — state home {home()}" + (f" (profile {profile!r})" if profile else " (the main home, no profile)"))
    checks: list[Check] = []

    def record(check: Check) -> None:
        checks.append(check)
        show(check)

    record(check_python())
    record(check_home())
    record(check_private_home())
    config_check, config = check_config()
    if config is not None:
        redactor.add(config.secrets)
    record(config_check)
    model_check, ready = check_model_configured(config)
    if model_check is not None:
        record(model_check)
    if config is not None and not config.model:
        record(Check(None, "No model configured: hermes-mcp will use the client's model where the client offers sampling"))
    if ready and config is not None:
        record(await check_model_reachable(config, timeout))
    else:
        record(Check(None, "Model reachability not checked (no usable model configuration)"))
    record(await check_store())
    record(check_hermes_acp())
    record(check_sandbox())
    for check in await asyncio.to_thread(check_docker_projects, config):
        record(check)
    for check in await check_ssh_projects(config, timeout):
        record(check)
    record(check_mcp_token())
    record(check_node())

    failures = [c for c in checks if c.ok is False and c.required]
    if failures:
        out(f"{len(failures)} problem{'s' if len(failures) > 1 else ''} found.")
        return 1
    out("All checks passed. Point your editor at hermes-acp (see the README), or try 'hermes-editor demo'.")
    return 0


def _raw_secrets(path: Path) -> list[str]:
    """API keys written in config.toml, read leniently: an invalid file must not leak its key either."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, tomllib.TOMLDecodeError):
        return []
    providers = raw.get("providers") if isinstance(raw, dict) else None
    if not isinstance(providers, dict):
        return []
    return [str(p["api_key"]) for p in providers.values() if isinstance(p, dict) and p.get("api_key")]


# -- the checks, in the order they are shown ------------------------------------------------


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] >= MIN_PYTHON:
        return Check(True, f"Python {version} ({sys.executable})")
    need = ".".join(map(str, MIN_PYTHON))
    return Check(False, f"Python {version} is too old", f"Install Python {need} or newer and reinstall hermes-editor with it.")


def check_home() -> Check:
    path = home()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-", delete=True):
            pass
    except OSError as exc:
        return Check(
            False,
            f"State home {path} is not writable ({exc.strerror or exc})",
            "Fix its permissions, or set HERMES_EDITOR_HOME to a directory you can write.",
        )
    return Check(True, f"State home {path} is writable")


def check_private_home() -> Check:
    """Take group and other bits off the state home and everything in it, and say what changed."""
    from core.state_home import repair_modes

    path = home()
    repair = repair_modes(path)
    if repair.failed:
        return Check(
            False,
            f"State home {path}: could not make these private: {repair.describe_failed()}",
            f"Make them yours (chown) and run 'hermes-editor doctor' again, or move them out of {path}.",
        )
    if repair.fixed:
        return Check(True, f"State home {path} made private: {repair.describe_fixed()}")
    return Check(True, f"State home {path} is private (directories 0700, files owner-only)")


def check_config() -> tuple[Check, Config | None]:
    path = config_path()
    try:
        config = load_config()
    except ConfigError as exc:
        # Most config errors already say what to do; add advice only where they don't.
        fix = None if "hermes-editor setup" in str(exc) else "Fix the file, or run 'hermes-editor setup' to write a new one."
        return Check(False, f"Config is invalid: {exc}", fix), None
    if path.exists():
        return Check(True, f"Config {path} is valid"), config
    return Check(True, f"No config file ({path}); using defaults and environment variables"), config


def check_model_configured(config: Config | None) -> tuple[Check | None, bool]:
    if config is None:
        return None, False  # the config check already said what is wrong
    if not config.model:
        return Check(False, "No model is configured", SETUP_HINT), False
    try:
        ref = config.model_ref()
    except ConfigError as exc:
        return Check(False, f"Model '{config.model}' cannot be used: {exc}", SETUP_HINT), False
    assert ref is not None
    where = ref.config.base_url or ref.config.resolved_profile(ref.provider).base_url or "the provider's default endpoint"
    return Check(True, f"Model {ref.label} via {where}"), True


async def check_model_reachable(config: Config, timeout: float) -> Check:
    """One tiny request to the primary model: no retries, no fallbacks, no tools."""
    from core.messages import UserMessage
    from core.models import ModelError, ModelRequest, ResponseDone, TextChunk, build_model

    single = config.model_copy(update={"fallback_models": [], "retry": config.retry.model_copy(update={"max_attempts": 1})})
    label = config.model or "the model"
    request = ModelRequest(
        system="You are a connectivity check. Answer briefly.",
        messages=[UserMessage.of("Reply with OK.")],
        max_tokens=16,
    )
    text: list[str] = []
    finish = ""
    started = time.monotonic()
    model = None
    try:
        model = build_model(single)

        async def consume() -> None:
            nonlocal finish
            async for event in model.stream(request):
                if isinstance(event, TextChunk):
                    text.append(event.text)
                elif isinstance(event, ResponseDone):
                    finish = event.finish_reason

        await asyncio.wait_for(consume(), timeout)
    except ModelError as exc:
        return Check(False, f"Model {label} is not reachable", exc.user_message())
    except TimeoutError:
        return Check(
            False,
            f"Model {label} did not answer within {timeout:g} s",
            "Check base_url and the network, or try again with --timeout.",
        )
    except ConfigError as exc:
        return Check(False, f"Model {label} cannot be built: {exc}", SETUP_HINT)
    except Exception as exc:  # an adapter bug or an SDK surprise: report it, don't crash the doctor
        return Check(
            False, f"Model {label} failed: {type(exc).__name__}: {exc}", "Run with a fresh 'hermes-editor setup', or report the error."
        )
    finally:
        if model is not None:
            try:
                await model.aclose()
            except Exception:
                pass
    elapsed = time.monotonic() - started
    reply = " ".join("".join(text).split())
    said = f'replied "{reply[:40]}"' if reply else f"answered (no text, finish reason {finish or 'unknown'})"
    return Check(True, f"Model {label} is reachable: {said} in {elapsed:.1f} s")


async def check_store() -> Check:
    from core.store import SessionStore

    path = home() / "state.db"
    try:
        async with SessionStore.open(path):
            pass
    except (OSError, sqlite3.Error) as exc:
        return Check(
            False,
            f"Store {path} does not open: {exc}",
            "Check the file's permissions and free disk space; move a damaged file aside to start afresh.",
        )
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            result = [row[0] for row in conn.execute("PRAGMA integrity_check")]
            sessions = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return Check(False, f"Store {path} cannot be checked: {exc}", "Move the damaged file aside; a new one is created on next use.")
    if result != ["ok"]:
        return Check(
            False,
            f"Store {path} failed its integrity check: {'; '.join(result[:3])}",
            "Back the file up, then try: sqlite3 state.db '.recover' | sqlite3 recovered.db",
        )
    return Check(True, f"Store {path} opens; integrity ok ({sessions} session{'s' if sessions != 1 else ''})")


def find_hermes_acp() -> tuple[str | None, bool]:
    """The hermes-acp executable and whether it is on PATH."""
    on_path = shutil.which("hermes-acp")
    if on_path:
        return on_path, True
    beside = Path(sys.executable).parent / "hermes-acp"
    if beside.exists() and os.access(beside, os.X_OK):
        return str(beside), False
    return None, False


def check_hermes_acp() -> Check:
    path, on_path = find_hermes_acp()
    if path is None:
        return Check(False, "hermes-acp was not found", "Reinstall: pipx install hermes-editor (or pip install hermes-editor).")
    if on_path:
        return Check(True, f"hermes-acp on PATH: {path}")
    return Check(True, f"hermes-acp found at {path} (not on PATH: give editors this full path)")


def check_sandbox() -> Check:
    """Which OS sandbox commands run in; without one, accept-edits and auto ask for every command."""
    from core.host.sandbox import status

    found = status()
    if found.active:
        return Check(True, f"Commands run in a sandbox: {found.detail} (project writable, credentials hidden, no network)")
    fix = (
        "Install bubblewrap (Debian/Ubuntu: sudo apt install bubblewrap; Fedora: sudo dnf install bubblewrap)"
        if sys.platform.startswith("linux")
        else "Commands will ask before they run."
    )
    return Check(
        False, f"No sandbox: {found.detail}. In accept-edits and auto, every command that does more than read asks", fix, required=False
    )


def check_docker_projects(config: Config | None) -> list[Check]:
    """For ``[projects.NAME] host = "docker"``: whether the daemon answers and each image is there."""
    docker = {name: p for name, p in (config.projects if config else {}).items() if p.host == "docker"}
    if not docker:
        return []
    from core.host.docker import DockerUnavailable, daemon_status, image_present

    reachable, detail = daemon_status()
    if not reachable:
        return [Check(False, f"Docker projects ({', '.join(docker)}) cannot run commands: {detail}", "Start Docker, or set DOCKER_HOST.")]
    checks = [Check(True, f"Docker daemon: {detail}")]
    for name, project in docker.items():
        try:
            present = image_present(project.image or "")
        except DockerUnavailable as exc:
            checks.append(Check(False, f"Project {name}: {exc}"))
            continue
        if present:
            checks.append(Check(True, f"Project {name}: image {project.image} is present"))
        else:
            fix = f"Build it (docker build -t {project.image} .) or pull it (docker pull {project.image})"
            checks.append(Check(False, f"Project {name}: image {project.image} is not on the Docker daemon", fix))
    return checks


async def check_ssh_projects(config: Config | None, timeout: float) -> list[Check]:
    """For ``[projects.NAME] host = "ssh"``: whether each one connects (its host key known, the
    login accepted) and its remote directory is there, each within ``timeout`` seconds."""
    ssh = {name: p for name, p in (config.projects if config else {}).items() if p.host == "ssh"}
    return list(await asyncio.gather(*(_check_ssh_project(name, project, timeout) for name, project in ssh.items())))


async def _check_ssh_project(name: str, project: ProjectConfig, timeout: float) -> Check:
    try:
        from core.host.ssh import SshError, SshHost
    except ModuleNotFoundError as exc:
        return Check(False, f"Project {name}: the ssh host needs the Python package {exc.name!r}", "Reinstall hermes-editor.")
    try:
        host = SshHost(name, project)
    except ValueError as exc:
        return Check(False, f"Project {name}: {exc}")
    where, root = host.target.label, str(host.target.root)
    try:
        async with asyncio.timeout(timeout):
            kind = await host.kind_of(root)
    except TimeoutError:
        return Check(False, f"Project {name}: {where} did not answer within {timeout:g}s", "Check the host name, the port and the network.")
    except (SshError, OSError) as exc:
        return Check(False, f"Project {name}: {exc}")
    finally:
        await host.aclose()
    if kind != "dir":
        what = "does not exist" if kind is None else "is not a directory"
        return Check(False, f"Project {name}: {root} {what} on {where}", f"Create it there, or fix ssh in [projects.{name}].")
    return Check(True, f"Project {name}: {where} connects and {root} is there")


def check_mcp_token() -> Check:
    """Where the bearer token of hermes-mcp --http is, and that only its owner can read it."""
    from core.tokens import TOKEN_ENV, TokenError, read_mcp_token, token_path

    try:
        token = read_mcp_token()
    except TokenError as exc:
        return Check(False, "MCP token (hermes-mcp --http) is not usable", str(exc))
    if token is None:
        return Check(None, f"No MCP token yet: 'hermes-mcp --http' makes {token_path()} (mode 0600) when it first starts")
    # Enough of the value to tell tokens apart, never enough to use one (the rest stays redacted).
    shown = f"{token.value[:4]}… ({len(token.value)} characters)"
    if token.source == "env":
        return Check(True, f"MCP token {shown} from {TOKEN_ENV}: clients of 'hermes-mcp --http' send 'Authorization: Bearer <token>'")
    return Check(
        True,
        f"MCP token {shown} in {token.path} (mode 0600): clients of 'hermes-mcp --http' send "
        f"'Authorization: Bearer <token>'; print it with: cat {token.path}",
    )


def check_node() -> Check:
    node = shutil.which("node")
    fix = "Install Node.js only if you want the npm test clients (acpx, the MCP Inspector)."
    if node is None:
        return Check(False, "Node.js not found", fix, required=False)
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return Check(False, f"Node.js at {node} does not run", fix, required=False)
    return Check(True, f"Node.js {version or '(unknown version)'} (for the npm test clients)", required=False)
