"""Configuration: ``$HERMES_EDITOR_HOME/config.toml``, validated, with environment overrides.

Errors name the file, the key and the expected form. API keys are ``SecretStr`` so that no
repr, log line or error message can carry them.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, field_validator
from pydantic_core import ErrorDetails

from core.curator_config import CuratorSettings
from core.learning_config import LearningSettings, SkillsSettings
from core.state_home import home_path

__all__ = [
    "CodeConfig",
    "Config",
    "ConfigError",
    "CronConfig",
    "CronWebhookConfig",
    "DelegateConfig",
    "GatewayConfig",
    "McpConfig",
    "McpServerConfig",
    "ModelsConfig",
    "TelegramConfig",
    "DiscordConfig",
    "EmailConfig",
    "MatrixConfig",
    "PlatformSettings",
    "SignalConfig",
    "SlackConfig",
    "VoiceConfig",
    "WhatsAppConfig",
    "WebConfig",
    "ModelRef",
    "ProviderConfig",
    "ProviderProfile",
    "PROFILES",
    "ProjectConfig",
    "SandboxConfig",
    "config_path",
    "home",
    "load_config",
]


def home() -> Path:
    """The state home: ``$HERMES_EDITOR_HOME`` or ``~/.hermes-editor``, or ``profiles/NAME`` in it with a
    profile (``--profile``, ``HERMES_EDITOR_PROFILE``): :func:`core.state_home.home_path` decides."""
    return Path(home_path())


def config_path() -> Path:
    return home() / "config.toml"


@dataclass(frozen=True, slots=True)
class ProviderProfile:
    """Provider quirks as data: what wire it speaks and how it differs."""

    wire: Literal["openai", "anthropic"]
    base_url: str | None = None
    key_env: str | None = None
    base_url_env: str | None = None
    needs_key: bool = True
    # OpenAI's newer models take max_completion_tokens; most compatible servers take max_tokens.
    max_tokens_param: str = "max_tokens"
    # Where a compatible server streams reasoning text, if anywhere.
    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")
    stream_usage: bool = True
    extra_headers: tuple[tuple[str, str], ...] = ()
    # What the models behind it can do, by default (a provider entry can say otherwise).
    context_window: int = 128_000
    images: bool = False
    reasoning_levels: tuple[str, ...] = ()
    # The model family whose working notes its models get (core.models.families), when every model
    # behind it is of one family; None: the model's name says.
    family: str | None = None


PROFILES: dict[str, ProviderProfile] = {
    "openai": ProviderProfile(
        wire="openai",
        key_env="OPENAI_API_KEY",
        base_url_env="OPENAI_BASE_URL",
        max_tokens_param="max_completion_tokens",
        images=True,
        reasoning_levels=("low", "medium", "high"),
    ),
    "anthropic": ProviderProfile(
        wire="anthropic",
        key_env="ANTHROPIC_API_KEY",
        base_url_env="ANTHROPIC_BASE_URL",
        context_window=200_000,
        images=True,
        reasoning_levels=("low", "medium", "high"),
        family="claude",
    ),
    "openrouter": ProviderProfile(
        wire="openai",
        base_url="https://openrouter.ai/api/v1",
        key_env="OPENROUTER_API_KEY",
        extra_headers=(("X-Title", "hermes-editor"),),
        images=True,
    ),
    "ollama": ProviderProfile(wire="openai", base_url="http://127.0.0.1:11434/v1", needs_key=False, context_window=32_768),
    "lmstudio": ProviderProfile(wire="openai", base_url="http://127.0.0.1:1234/v1", needs_key=False, context_window=32_768),
    "vllm": ProviderProfile(wire="openai", base_url="http://127.0.0.1:8000/v1", needs_key=False, context_window=32_768),
    "llamacpp": ProviderProfile(wire="openai", base_url="http://127.0.0.1:8080/v1", needs_key=False, context_window=32_768),
    # Any other OpenAI-compatible endpoint: give base_url (and api_key if it needs one).
    "openai-compatible": ProviderProfile(wire="openai", needs_key=False, context_window=32_768),
}


# The model families with working notes of their own (core.models.families holds the notes; a test
# keeps the two lists equal), and "none": a provider entry's ``family``.
ModelFamily = Literal["claude", "gpt", "gemini", "deepseek", "open-weights", "none"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProviderConfig(_Strict):
    """One provider entry, ``[providers.NAME]``."""

    profile: str | None = Field(default=None, description="quirk profile; defaults to the provider's name")
    api_key: SecretStr | None = None
    base_url: str | None = None
    timeout: float = Field(default=600.0, gt=0)
    models: list[str] = Field(default_factory=list, description="models offered in the editor's model picker")
    context_window: int | None = Field(default=None, gt=0, description="tokens; defaults by profile")
    images: bool | None = Field(default=None, description="whether its models accept images; defaults by profile")
    reasoning: bool | None = Field(default=None, description="whether its models take a reasoning effort")
    family: ModelFamily | None = Field(
        default=None,
        description="the model family whose working notes its models get in the prompt; defaults by profile, then by model name; "
        '"none" for no notes',
    )

    def resolved_profile(self, name: str) -> ProviderProfile:
        """The quirk profile with this entry's overrides applied."""
        base = PROFILES.get(self.profile or name) or PROFILES["openai-compatible"]
        changes: dict[str, Any] = {}
        if self.context_window is not None:
            changes["context_window"] = self.context_window
        if self.images is not None:
            changes["images"] = self.images
        if self.reasoning is not None:
            changes["reasoning_levels"] = ("low", "medium", "high") if self.reasoning else ()
        if self.family is not None:
            changes["family"] = self.family
        return dataclasses.replace(base, **changes) if changes else base


class PriceConfig(_Strict):
    """``[pricing."provider:model"]``: US dollars per million tokens, over the built-in table."""

    input: float = Field(ge=0, description="per million uncached input tokens")
    output: float = Field(ge=0, description="per million output tokens")
    cache_read: float | None = Field(default=None, ge=0, description="per million cached input tokens read; defaults to input")
    cache_write: float | None = Field(default=None, ge=0, description="per million input tokens written to a cache; defaults to input")


class RetryConfig(_Strict):
    max_attempts: int = Field(default=4, ge=1, le=20)
    base_delay: float = Field(default=1.0, ge=0)
    max_delay: float = Field(default=30.0, ge=0)


class ApprovalConfig(_Strict):
    timeout: float = Field(default=1800.0, gt=0, description="seconds before an unanswered approval is denied")


class TelegramConfig(_Strict):
    """``[telegram]``: the bot. The token may come from ``TELEGRAM_BOT_TOKEN`` instead."""

    token: SecretStr | None = Field(default=None, description="bot token from @BotFather")
    api_base_url: str | None = Field(default=None, description="Bot API base, e.g. https://api.telegram.org/bot")
    allowed_users: list[int] = Field(default_factory=list, description="numeric Telegram user ids (never names)")
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = Field(default=None, description="required in webhook mode")
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, gt=0, lt=65536)
    poll_timeout: float = Field(default=30.0, ge=0, description="seconds one getUpdates long poll waits")
    edit_interval: float = Field(default=1.5, gt=0, description="seconds between edits of a streaming reply")


class PlatformSettings(_Strict):
    """What every chat platform's section shares: who may talk to the bot and who owns it."""

    enabled: bool = Field(default=True, description="false keeps the section but does not connect")
    allowed_users: list[str] = Field(default_factory=list, description="the platform's user ids (never names)")
    owner: str | None = Field(default=None, description="the owner's user id on this platform")
    api_base_url: str | None = Field(default=None, description="the platform's API base (a local server in tests)")
    edit_interval: float = Field(default=1.5, gt=0, description="seconds between edits of a streaming reply")

    @field_validator("allowed_users", mode="before")
    @classmethod
    def _ids_as_text(cls, value: Any) -> Any:
        return [str(v) for v in value] if isinstance(value, list) else value

    @field_validator("owner", mode="before")
    @classmethod
    def _owner_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value

    def configured(self) -> bool:
        """Whether this platform has what it needs to connect (its credentials)."""
        return False


class DiscordConfig(PlatformSettings):
    """``[discord]``: a bot from the Developer Portal (Message Content intent on). Token may come from ``DISCORD_BOT_TOKEN``."""

    token: SecretStr | None = None
    gateway_url: str | None = Field(default=None, description="the websocket gateway (a local server in tests)")

    def configured(self) -> bool:
        return self.enabled and self.token is not None


class SlackConfig(PlatformSettings):
    """``[slack]``: a Slack app; Socket Mode needs the app-level token (``xapp-``), the Events API a signing secret."""

    bot_token: SecretStr | None = Field(default=None, description="xoxb-... (SLACK_BOT_TOKEN)")
    app_token: SecretStr | None = Field(default=None, description="xapp-... for Socket Mode (SLACK_APP_TOKEN)")
    mode: Literal["socket", "events"] = "socket"
    signing_secret: SecretStr | None = Field(default=None, description="Events API mode: requests are verified with it")
    events_listen: str = "127.0.0.1"
    events_port: int = Field(default=3000, gt=0, lt=65536)
    events_path: str = Field(default="/slack/events", description="Events API mode: the path of the Request URL")
    slash_command: str = Field(default="/hermes", description="the app's slash command: '/hermes new' in the DM is /new")

    def configured(self) -> bool:
        return self.enabled and self.bot_token is not None


class WhatsAppConfig(PlatformSettings):
    """``[whatsapp]``: the WhatsApp Business Cloud API (a webhook in, the Graph API out)."""

    access_token: SecretStr | None = Field(default=None, description="WHATSAPP_ACCESS_TOKEN")
    phone_number_id: str | None = None
    app_secret: SecretStr | None = Field(default=None, description="signs webhook requests (X-Hub-Signature-256); required")
    verify_token: SecretStr | None = Field(default=None, description="echoed in the webhook verification handshake")
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8444, gt=0, lt=65536)
    webhook_path: str = "/whatsapp"

    def configured(self) -> bool:
        return self.enabled and self.access_token is not None and self.phone_number_id is not None


class SignalConfig(PlatformSettings):
    """``[signal]``: a signal-cli daemon (``signal-cli -a NUMBER daemon --http``) on this machine."""

    account: str | None = Field(default=None, description="the bot's phone number, +4912345...")
    url: str = Field(default="http://127.0.0.1:8080", description="the daemon's HTTP address")

    def configured(self) -> bool:
        return self.enabled and self.account is not None


class MatrixConfig(PlatformSettings):
    """``[matrix]``: a Matrix account on a homeserver. ``access_token`` (MATRIX_ACCESS_TOKEN) or ``password``."""

    homeserver: str | None = None
    user_id: str | None = Field(default=None, description="@bot:example.org")
    access_token: SecretStr | None = None
    password: SecretStr | None = None
    device_id: str | None = None
    encryption: bool = Field(default=False, description="join and answer in end-to-end encrypted rooms")

    def configured(self) -> bool:
        return (
            self.enabled
            and self.homeserver is not None
            and self.user_id is not None
            and (self.access_token is not None or self.password is not None)
        )


class EmailConfig(PlatformSettings):
    """``[email]``: a mailbox read over IMAP (IDLE) and answered over SMTP."""

    address: str | None = Field(default=None, description="the bot's address")
    imap_host: str | None = None
    imap_port: int = Field(default=993, gt=0, lt=65536)
    smtp_host: str | None = None
    smtp_port: int = Field(default=465, gt=0, lt=65536)
    username: str | None = None
    password: SecretStr | None = Field(default=None, description="EMAIL_PASSWORD")
    security: Literal["tls", "starttls", "none"] = Field(default="tls", description="none only for a server on this machine")
    smtp_security: Literal["tls", "starttls", "none"] | None = Field(
        default=None, description="SMTP's own, when it differs from IMAP's (port 587: starttls); security when unset"
    )
    folder: str = "INBOX"
    trusted_authserv_id: str | None = Field(
        default=None,
        description="the receiving server's authserv-id in Authentication-Results (*.domain: any host under it); only its verdicts count",
    )

    def configured(self) -> bool:
        return self.enabled and None not in (self.address, self.imap_host, self.smtp_host) and self.password is not None


class VoiceConfig(_Strict):
    """``[voice]``: speech to text for voice notes and audio prompts, text to speech for ``/voice on``.

    Unset base URLs fall back to the ``openai`` provider (OPENAI_API_KEY); see core.models.speech.
    """

    stt_base_url: str | None = Field(
        default=None,
        description='an OpenAI-compatible API with /audio/transcriptions (OpenAI, Groq, a local whisper server), or "local" for faster-whisper',
    )
    stt_model: str = Field(
        default="whisper-1", description='the model; with "local", a faster-whisper size or directory ("base" for whisper-1)'
    )
    stt_api_key: SecretStr | None = Field(default=None, description="VOICE_STT_API_KEY; else the key of the provider at the same base_url")
    stt_language: str | None = Field(default=None, description='ISO-639-1 code of the language spoken ("en"); detected when unset')
    tts_base_url: str | None = Field(default=None, description="an OpenAI-compatible API with /audio/speech")
    tts_model: str = "gpt-4o-mini-tts"
    tts_voice: str = "alloy"
    tts_api_key: SecretStr | None = Field(default=None, description="VOICE_TTS_API_KEY; else the key of the provider at the same base_url")
    max_seconds: float = Field(default=600.0, gt=0, description="longer voice notes are not transcribed")


# ``[gateway] owner``: a Telegram user id (a number), or "<platform>:<native id>".
_OWNER_FORM = re.compile(r"[0-9]+|[a-z][a-z0-9_]*:\S.*")


class GatewayConfig(_Strict):
    """``[gateway]``: projects a chat may bind to, the owner, remote approvals."""

    projects: dict[str, str] = Field(default_factory=dict, description="name = path; the first is the default")
    owner: int | str | None = Field(
        default=None,
        description='who gets remote approvals: an identity "discord:456", or a number (a Telegram user id)',
    )
    remote_approvals_after: float | None = Field(
        default=None, gt=0, description="seconds an editor's question waits before it goes to the owner's chat; off when unset"
    )
    shutdown_grace: float = Field(default=20.0, ge=0, description="seconds a turn in flight may finish on SIGTERM")
    files_max_bytes: int = Field(default=20_000_000, gt=0)

    @field_validator("owner", mode="before")
    @classmethod
    def _owner_identity(cls, value: Any) -> Any:
        if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            return value
        if isinstance(value, str) and _OWNER_FORM.fullmatch(value.strip()):
            return value.strip()
        raise ValueError('an identity such as "discord:456" or "email:ada@example.org", or a number (a Telegram user id)')


def _check_destination(spec: str) -> str:
    kind, _, value = spec.partition(":")
    if spec.startswith(("http://", "https://")):
        return spec
    if kind not in ("file", "webhook") or not value.strip():
        raise ValueError(f"{spec!r} is not a destination: write 'file:PATH', 'webhook:URL' or 'webhook:NAME'")
    if kind == "webhook" and "://" in value and not value.strip().startswith(("http://", "https://")):
        raise ValueError(f"{spec!r}: webhooks take only http and https URLs")
    return spec


class CronWebhookConfig(_Strict):
    """``[cron.webhooks.NAME]``: a webhook a job names as ``webhook:NAME``; its headers stay here."""

    url: str = Field(description="http or https URL the results are POSTed to")
    headers: dict[str, SecretStr] = Field(default_factory=dict, description="sent with each POST (an Authorization header, say)")

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http or https URL")
        return url


class CronConfig(_Strict):
    """``[cron]``: the scheduler inside ``hermes-gateway``."""

    enabled: bool = True
    timezone: str | None = Field(default=None, description="IANA zone for schedules; the system's when unset")
    catch_up_grace: float = Field(default=3600.0, ge=0, description="seconds after a missed slot within which one catch-up run happens")
    lease: float = Field(default=900.0, gt=0, description="seconds a claimed run is owned before another gateway may take it over")
    tick: float = Field(default=15.0, gt=0, description="seconds between scheduler passes")
    delivery_attempts: int = Field(default=5, ge=1, le=50)
    delivery_retry_delay: float = Field(default=5.0, ge=0, description="seconds before the first delivery retry (x4 each time)")
    run_timeout: float = Field(default=1800.0, gt=0)
    deliver: list[str] = Field(
        default_factory=list,
        description="where results of jobs that name no destination go, besides the store and the chat: 'file:PATH', 'webhook:URL|NAME'",
    )
    webhooks: dict[str, CronWebhookConfig] = Field(default_factory=dict, description="named webhooks with their headers")
    webhook_timeout: float = Field(default=15.0, gt=0, description="seconds a webhook POST may take")

    @field_validator("deliver")
    @classmethod
    def _destinations(cls, specs: list[str]) -> list[str]:
        return [_check_destination(spec) for spec in specs]


class SandboxConfig(_Strict):
    """``[sandbox]``: the OS sandbox commands run in (bubblewrap on Linux, Seatbelt on macOS)."""

    enabled: bool = Field(default=True, description="false: no sandbox; modes that would run commands in it ask instead")
    hide: list[str] = Field(default_factory=list, description="more paths hidden from commands (credential stores are always hidden)")


class McpConfig(_Strict):
    """``[mcp]``: where MCP clients may start tasks besides the folders they share as roots."""

    projects: list[str] = Field(
        default_factory=list, description="absolute project folders (~ allowed); never /, the home directory or above it"
    )

    @field_validator("projects")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not Path(path).expanduser().is_absolute():
                raise ValueError(f"{path!r} is not an absolute path")
        return paths


_ENV_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{")
_SERVER_NAME = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")
MAX_SERVER_NAME = 30
_SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIAL", re.IGNORECASE)


def expand_env_references(value: str, environ: Mapping[str, str]) -> str:
    """``value`` with each ``${NAME}`` replaced by that environment variable, ``$$`` by ``$``.

    Raises ``KeyError(NAME)`` for a variable that is not set, ``ValueError`` for a ``${`` that is
    not a reference (the message never quotes the value: it may be a secret).
    """

    def one(match: re.Match[str]) -> str:
        text = match.group(0)
        if text == "$$":
            return "$"
        name = match.group(1)
        if name is None:
            raise ValueError("has a '${' that is not a reference; write ${VARIABLE} (letters, digits and _), or $$ for a literal $")
        if name not in environ:
            raise KeyError(name)
        return environ[name]

    return _ENV_REFERENCE.sub(one, value)


class McpServerConfig(_Strict):
    """``[mcp_servers.NAME]``: an MCP server whose tools every session gets, on every surface.

    A stdio server has ``command`` (with ``args``, ``env``, ``cwd``); an HTTP server has ``url``
    (with ``headers``). Values in ``env`` and ``headers`` may say ``${VARIABLE}`` to take it from
    the environment, so that secrets need not be written in the file.
    """

    transport: Literal["stdio", "http", "sse"] | None = Field(
        default=None, description="stdio when command is set, http (streamable HTTP) when url is; say sse for an SSE server"
    )
    command: str | None = Field(default=None, description="program of a stdio server")
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict, description="variables for a stdio server; values may use ${VAR}")
    cwd: str | None = Field(default=None, description="where a stdio server runs; the session's project directory when unset")
    url: str | None = Field(default=None, repr=False, description="http(s) URL of a streamable HTTP or SSE server (may hold a key)")
    headers: dict[str, SecretStr] = Field(default_factory=dict, description="sent with each HTTP request; values may use ${VAR}")
    enabled: bool = Field(default=True, description="false: configured but not connected")

    @property
    def kind(self) -> Literal["stdio", "http", "sse"]:
        """The transport, said or implied."""
        if self.transport is not None:
            return self.transport
        return "stdio" if self.command else "http"

    def resolved(self, table: Literal["env", "headers"], environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """``env`` or ``headers`` with ``${VAR}`` references filled in.

        Raises ``ValueError`` naming the key and the variable when one is not set.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, str] = {}
        for key, secret in getattr(self, table).items():
            try:
                values[key] = expand_env_references(secret.get_secret_value(), environ)
            except KeyError as exc:
                raise ValueError(f"{table}.{key} refers to the environment variable {exc.args[0]}, which is not set") from None
        return values

    def secret_values(self) -> list[str]:
        """The values written in the file that are secrets: every header, env values named like a key or
        token, and the URL's query values and password."""
        found: list[str] = []
        for value in self.headers.values():
            found.append(value.get_secret_value())
            found.extend(value.get_secret_value().split()[1:])  # "Bearer TOKEN": the token alone too
        found += [value.get_secret_value() for key, value in self.env.items() if _SECRET_ENV_NAME.search(key)]
        if self.url:  # some servers take their key in the query string, or as user:password@
            from urllib.parse import parse_qsl, urlsplit

            parts = urlsplit(self.url)
            found += [value for _, value in parse_qsl(parts.query)] + [parts.password or ""]
        return [v for v in found if v and "${" not in v]


class ModelsConfig(_Strict):
    """``[models]``: auxiliary models for what the main one cannot do."""

    vision: str | None = Field(
        default=None,
        description='"provider:model" that sees images for a main model that does not take them (inspect_image, pasted images)',
    )


class CodeConfig(_Strict):
    """``[code]``: scripts run by execute_code."""

    timeout: float = Field(default=60.0, gt=0, le=3600, description="seconds a script may run (time in its tool calls not counted)")
    python: str | None = Field(default=None, description="interpreter scripts run with; /usr/bin/python3 when there, else python3 on PATH")


class WebConfig(_Strict):
    """``[web]``: web_fetch's domains and caps, and web_search's backend."""

    allow_domains: list[str] = Field(default_factory=list, description="fetched without a question (and names under them)")
    deny_domains: list[str] = Field(default_factory=list, description="never fetched (and names under them); wins over allow_domains")
    max_bytes: int = Field(default=5_000_000, gt=0, description="bytes one fetch downloads at most")
    timeout: float = Field(default=30.0, gt=0, description="seconds one request may take")
    search: Literal["searxng", "brave", "tavily", "exa"] | None = Field(default=None, description="web_search's backend")
    search_url: str | None = Field(default=None, description="the backend's address: required for searxng, overrides the others' API")
    search_api_key: SecretStr | None = Field(
        default=None, description="the backend's key; default: BRAVE_API_KEY, TAVILY_API_KEY or EXA_API_KEY"
    )


class DelegateConfig(_Strict):
    """``[delegate]``: subagents the delegate tool runs."""

    max_steps: int = Field(default=30, ge=1, le=1000, description="model requests one subagent may make")
    max_parallel: int = Field(default=3, ge=1, le=16, description="subagents running at once")
    max_tasks: int = Field(default=6, ge=1, le=50, description="tasks one delegate call may give")
    report_chars: int = Field(default=4000, ge=200, description="characters of each subagent's final report the parent reads")
    max_depth: int = Field(default=1, ge=1, le=3, description="1: subagents cannot delegate; 2: theirs may once more")


_MEMORY = re.compile(r"[0-9]+[bkmg]?", re.IGNORECASE)


class ProjectConfig(_Strict):
    """``[projects.NAME]``: where a project's files and commands live.

    ``path`` is the local folder an editor opens (or a gateway project names); sessions whose
    folder is it, or inside it, run on ``host``. ``local``: this machine; ``docker``: a container
    of ``image`` per session with ``path`` mounted at the same place; ``ssh``: a remote machine.
    """

    path: str = Field(description="the local folder (~ allowed) an editor opens for this project")
    host: Literal["local", "docker", "ssh"] = "local"
    # docker
    image: str | None = Field(default=None, description="docker: the image commands run in (built or pulled beforehand)")
    mounts: list[str] = Field(default_factory=list, description="docker: more bind mounts, 'SOURCE:TARGET' or 'SOURCE:TARGET:ro'")
    network: bool = Field(default=False, description="docker: give the container a network (none by default)")
    cpus: float | None = Field(default=None, gt=0, description="docker: CPUs the container may use")
    memory: str | None = Field(default=None, description="docker: memory limit, e.g. '2g' or '512m'")
    pids: int | None = Field(default=512, ge=1, description="docker: processes the container may hold")
    keep: bool = Field(default=False, description="docker: keep the container when the session closes")
    # ssh
    ssh: str | None = Field(default=None, description="ssh: 'user@box:/srv/app' (the remote project directory)")
    port: int | None = Field(default=None, gt=0, lt=65536, description="ssh: port (else ~/.ssh/config's, else 22)")
    identity_file: str | None = Field(default=None, description="ssh: private key file")
    known_hosts: str | None = Field(default=None, description="ssh: known_hosts file (else ~/.ssh/known_hosts)")

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, path: str) -> str:
        if not Path(path).expanduser().is_absolute():
            raise ValueError(f"{path!r} is not an absolute path (~ allowed)")
        return path

    @field_validator("memory")
    @classmethod
    def _memory(cls, memory: str | None) -> str | None:
        if memory is not None and not _MEMORY.fullmatch(memory.strip()):
            raise ValueError(f"{memory!r} is not a size: write bytes or a number with b, k, m or g, e.g. '2g'")
        return memory

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, mounts: list[str]) -> list[str]:
        for mount in mounts:
            parts = mount.split(":")
            mode_ok = len(parts) == 2 or (len(parts) == 3 and parts[2] in ("ro", "rw"))
            if not mode_ok or not all(Path(p).expanduser().is_absolute() for p in parts[:2]):
                raise ValueError(f"{mount!r} is not a mount: write 'SOURCE:TARGET' or 'SOURCE:TARGET:ro' with absolute paths")
        return mounts

    @property
    def folder(self) -> Path:
        """``path``, expanded and resolved."""
        return Path(self.path).expanduser().resolve()


class Config(_Strict):
    model: str | None = Field(default=None, description='"provider:model", e.g. "openai:gpt-4.1"')
    fallback_models: list[str] = Field(default_factory=list)
    max_steps: int = Field(default=60, ge=1, le=1000, description="model requests per turn")
    max_tokens: int = Field(default=8192, ge=1)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    pricing: dict[str, PriceConfig] = Field(
        default_factory=dict, description='prices by "provider:model" (or a bare model name), over core.models.pricing\'s table'
    )
    retry: RetryConfig = Field(default_factory=RetryConfig)
    approvals: ApprovalConfig = Field(default_factory=ApprovalConfig)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    whatsapp: WhatsAppConfig = Field(default_factory=WhatsAppConfig)
    signal: SignalConfig = Field(default_factory=SignalConfig)
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)
    email: EmailConfig = Field(default_factory=EmailConfig)
    voice: VoiceConfig = Field(default_factory=VoiceConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    cron: CronConfig = Field(default_factory=CronConfig)
    learning: LearningSettings = Field(default_factory=LearningSettings)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)
    curator: CuratorSettings = Field(default_factory=CuratorSettings)
    mcp: McpConfig = Field(default_factory=McpConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict, description="MCP servers every session connects to")
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    delegate: DelegateConfig = Field(default_factory=DelegateConfig)
    code: CodeConfig = Field(default_factory=CodeConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    projects: dict[str, ProjectConfig] = Field(default_factory=dict, description="where each project's files and commands live")
    # The value of HERMES_MODEL when ``model`` came from it: errors about that model name the variable.
    _model_from_env: str | None = PrivateAttr(default=None)

    def profile(self, spec: str | None = None) -> ProviderProfile | None:
        """The quirk profile of a model's provider; None when no model resolves."""
        try:
            ref = self.model_ref(spec)
        except ConfigError:
            return None
        return ref.config.resolved_profile(ref.provider) if ref else None

    def context_window(self, spec: str | None = None) -> int:
        """Tokens the model takes, from its provider's profile (0 when no model resolves)."""
        profile = self.profile(spec)
        return profile.context_window if profile else 0

    def model_ref(self, spec: str | None = None) -> ModelRef | None:
        """Resolve ``provider:model`` (or a bare name when one provider is configured)."""
        spec = spec or self.model
        if not spec:
            return None
        return parse_model_ref(spec, self.providers, env=_MODEL_ENV if spec == self._model_from_env else None)

    def model_choices(self) -> list[str]:
        """Models a user may switch to: the configured one, fallbacks, and each provider's ``models`` list."""
        labels: list[str] = []
        for spec in [self.model, *self.fallback_models]:
            if not spec:
                continue
            try:
                ref = self.model_ref(spec)
            except ConfigError:
                continue
            if ref is not None:
                labels.append(ref.label)
        for name, provider in self.providers.items():
            labels.extend(f"{name}:{model}" for model in provider.models)
        return list(dict.fromkeys(labels))

    def owner_identities(self) -> frozenset[str]:
        """The owner's identities (``telegram:123``, ``discord:456``): ``[gateway] owner`` (a number is a
        Telegram user id) and the ``owner`` of each platform's section."""
        found: set[str] = set()
        if self.gateway.owner is not None:
            owner = str(self.gateway.owner)
            found.add(owner if ":" in owner else f"telegram:{owner}")
        for name in type(self).model_fields:
            section = getattr(self, name)
            if isinstance(section, PlatformSettings) and section.owner:
                found.add(f"{name}:{section.owner}")
        return frozenset(found)

    @property
    def secrets(self) -> list[str]:
        """Every secret value configured, for redaction."""
        found = [p.api_key.get_secret_value() for p in self.providers.values() if p.api_key]
        for secret in (
            self.telegram.token,
            self.telegram.webhook_secret,
            self.discord.token,
            self.slack.bot_token,
            self.slack.app_token,
            self.slack.signing_secret,
            self.whatsapp.access_token,
            self.whatsapp.app_secret,
            self.whatsapp.verify_token,
            self.matrix.access_token,
            self.matrix.password,
            self.email.password,
            self.voice.stt_api_key,
            self.voice.tts_api_key,
        ):
            if secret is not None:
                found.append(secret.get_secret_value())
        for hook in self.cron.webhooks.values():
            for value in hook.headers.values():
                found.append(value.get_secret_value())
                found.extend(value.get_secret_value().split()[1:])  # "Bearer TOKEN": the token alone too
        for server in self.mcp_servers.values():
            found.extend(server.secret_values())
        if self.web.search_api_key is not None:
            found.append(self.web.search_api_key.get_secret_value())
        from core.tokens import mcp_token_values

        found.extend(mcp_token_values())
        return found


@dataclass(frozen=True, slots=True)
class ModelRef:
    provider: str
    model: str
    config: ProviderConfig

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


class ConfigError(Exception):
    """A configuration problem, naming the file and key (or the environment variable) and what was expected."""

    def __init__(self, message: str, *, path: Path | None = None, key: str | None = None, env: str | None = None) -> None:
        self.path = path
        self.key = key
        self.env = env
        if env:
            where = f"environment variable {env}"
        else:
            where = f"{path}" if path else "configuration"
            if key:
                where += f", key '{key}'"
        super().__init__(f"{where}: {message}")


_MODEL_ENV = "HERMES_MODEL"
_MODEL_EXAMPLE = '"openai:gpt-4.1" (or "ollama:qwen3:8b")'


def _model_form_problem(spec: str) -> str | None:
    """What is wrong with the form of a model reference ('openai:', ':gpt-4'), or None."""
    provider, sep, model = spec.partition(":")
    if not sep:
        return None
    if not provider.strip() and not model.strip():
        return f"model '{spec}' names neither a provider nor a model"
    if not provider.strip():
        return f"model '{spec}' names no provider before ':'"
    if not model.strip():
        return f"model '{spec}' names no model after ':'"
    return None


def parse_model_ref(spec: str, providers: dict[str, ProviderConfig], *, env: str | None = None) -> ModelRef:
    """Resolve ``spec`` against the configured providers; errors blame ``env`` when the spec came from it."""
    blame: dict[str, Any] = {"env": env} if env else {"path": config_path(), "key": "model"}
    if problem := _model_form_problem(spec):
        raise ConfigError(f"{problem}; write it as 'provider:model', e.g. {_MODEL_EXAMPLE}.", **blame)
    provider, sep, model = spec.partition(":")
    if sep and provider in providers:
        return ModelRef(provider, model, providers[provider])
    if sep and provider in PROFILES:
        fix = f"Add [providers.{provider}] to config.toml or set {PROFILES[provider].key_env or 'its base_url'}"
        raise ConfigError(
            f"model '{spec}' names provider '{provider}', which is not configured. "
            + (f"{fix}, or set {env} to a configured provider's model." if env else f"{fix}."),
            **blame,
        )
    # A bare model name (which may itself contain ':' as in Ollama's "qwen3:8b").
    if len(providers) == 1:
        (only,) = providers
        return ModelRef(only, spec, providers[only])
    if not providers:
        raise ConfigError(
            f"model '{spec}' is set but no provider is configured. Set OPENAI_API_KEY, "
            "ANTHROPIC_API_KEY or OPENROUTER_API_KEY, or add a [providers.NAME] table.",
            **blame,
        )
    raise ConfigError(
        f"model '{spec}' does not say which provider to use; write it as 'provider:model' with one of: {', '.join(sorted(providers))}.",
        **blame,
    )


_ENV_PROVIDERS = ("openai", "anthropic", "openrouter")
# Platform secrets that may come from the environment instead of config.toml.
_PLATFORM_SECRETS = (
    ("discord", "token", "DISCORD_BOT_TOKEN"),
    ("slack", "bot_token", "SLACK_BOT_TOKEN"),
    ("slack", "app_token", "SLACK_APP_TOKEN"),
    ("slack", "signing_secret", "SLACK_SIGNING_SECRET"),
    ("whatsapp", "access_token", "WHATSAPP_ACCESS_TOKEN"),
    ("whatsapp", "app_secret", "WHATSAPP_APP_SECRET"),
    ("whatsapp", "verify_token", "WHATSAPP_VERIFY_TOKEN"),
    ("matrix", "access_token", "MATRIX_ACCESS_TOKEN"),
    ("matrix", "password", "MATRIX_PASSWORD"),
    ("email", "password", "EMAIL_PASSWORD"),
    ("voice", "stt_api_key", "VOICE_STT_API_KEY"),
    ("voice", "tts_api_key", "VOICE_TTS_API_KEY"),
)


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read config.toml (if present), validate it, and apply environment overrides."""
    path = path or config_path()
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    if path.exists():
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"not valid TOML ({exc}). Fix the syntax or run 'hermes-editor setup'.", path=path) from None
        except OSError as exc:
            raise ConfigError(f"cannot be read ({exc.strerror}).", path=path) from None
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        expected = _expected(err)
        raise ConfigError(f"{expected}. Fix it in the file or run 'hermes-editor setup'.", path=path, key=key) from None
    _check_model_forms(config, path)
    _check_mcp_servers(config, path)
    _check_projects(config, path)
    for name, source in config.skills.sources.items():
        if found := source.problem():
            raise ConfigError(f"{found[1]}.", path=path, key=f"skills.sources.{name}" + (f".{found[0]}" if found[0] else ""))

    for name in _ENV_PROVIDERS:
        profile = PROFILES[name]
        api_key = env.get(profile.key_env or "")
        base = env.get(profile.base_url_env or "") if profile.base_url_env else None
        if not api_key and not base:
            continue
        entry = config.providers.get(name) or ProviderConfig()
        update: dict[str, Any] = {}
        if api_key:
            update["api_key"] = SecretStr(api_key)
        if base:
            update["base_url"] = base
        config.providers[name] = entry.model_copy(update=update)
    if env.get("TELEGRAM_BOT_TOKEN"):
        config.telegram.token = SecretStr(env["TELEGRAM_BOT_TOKEN"])
    if env.get("TELEGRAM_API_BASE_URL"):
        config.telegram.api_base_url = env["TELEGRAM_API_BASE_URL"]
    for section, key, variable in _PLATFORM_SECRETS:
        if env.get(variable):
            setattr(getattr(config, section), key, SecretStr(env[variable]))
    if env_model := env.get(_MODEL_ENV):
        if problem := _model_form_problem(env_model):
            raise ConfigError(
                f"{problem}. Set it as provider:model, e.g. {_MODEL_ENV}=openai:gpt-4.1, or unset it to use config.toml's model.",
                env=_MODEL_ENV,
            )
        config.model = env_model
        config._model_from_env = env_model
    for name, provider in config.providers.items():
        profile = provider.resolved_profile(name)
        if profile.wire == "openai" and not (provider.base_url or profile.base_url) and name != "openai":
            raise ConfigError(
                "an OpenAI-compatible provider needs base_url (for example http://127.0.0.1:11434/v1).",
                path=path,
                key=f"providers.{name}.base_url",
            )
    from core.redaction import add_secrets

    add_secrets(config.secrets)  # whatever leaves a tool from now on is scrubbed of them
    return config


def _check_model_forms(config: Config, path: Path) -> None:
    """Reject model references without a provider or a model ('openai:', ':gpt-4') in the file."""
    refs = [("model", config.model), ("learning.summary_model", config.learning.summary_model), ("models.vision", config.models.vision)]
    refs.append(("curator.model", config.curator.model))
    refs += [(f"fallback_models.{i}", spec) for i, spec in enumerate(config.fallback_models)]
    for key, spec in refs:
        if spec and (problem := _model_form_problem(spec)):
            raise ConfigError(f'{problem}; write it as "provider:model", e.g. {_MODEL_EXAMPLE}.', path=path, key=key)


def _check_mcp_servers(config: Config, path: Path) -> None:
    """What the schema alone cannot say about ``[mcp_servers.NAME]``; errors never quote env or header values."""
    for name, server in config.mcp_servers.items():
        key = f"mcp_servers.{name}"
        if len(name) > MAX_SERVER_NAME or not _SERVER_NAME.fullmatch(name):
            raise ConfigError(
                f"'{name}' cannot name an MCP server: use letters, digits, and single '-' or '_' between them, "
                f"up to {MAX_SERVER_NAME} characters (e.g. [mcp_servers.github]); tool names are made from it.",
                path=path,
                key=key,
            )
        if not server.command and not server.url:
            raise ConfigError('needs command (a stdio server, e.g. command = "npx") or url (an HTTP or SSE server).', path=path, key=key)
        if server.command and server.url:
            raise ConfigError(
                "has both command and url; give command for a stdio server or url for an HTTP or SSE server.", path=path, key=key
            )
        if server.kind == "stdio":
            if not server.command:
                raise ConfigError('a stdio server needs command, e.g. command = "npx".', path=path, key=key)
            if server.headers:
                raise ConfigError("headers apply to HTTP and SSE servers; a stdio server takes env.", path=path, key=f"{key}.headers")
            if server.cwd is not None and not Path(server.cwd).expanduser().is_absolute():
                raise ConfigError(f"{server.cwd!r} is not an absolute path.", path=path, key=f"{key}.cwd")
        else:
            if not server.url:
                raise ConfigError(f'an {server.kind.upper()} server needs url, e.g. url = "https://example.com/mcp".', path=path, key=key)
            if not server.url.startswith(("http://", "https://")):
                raise ConfigError("url must start with http:// or https://.", path=path, key=f"{key}.url")
            for field in ("env", "args", "cwd"):
                if getattr(server, field):
                    raise ConfigError(
                        f"{field} applies to stdio servers; an HTTP or SSE server takes headers.", path=path, key=f"{key}.{field}"
                    )
        for table in ("env", "headers"):
            for item, value in getattr(server, table).items():
                try:
                    expand_env_references(value.get_secret_value(), _AnyVariable())
                except ValueError as exc:
                    raise ConfigError(f"{exc}.", path=path, key=f"{key}.{table}.{item}") from None


def _check_projects(config: Config, path: Path) -> None:
    """What each host needs, and ``[gateway] projects`` values that name a ``[projects.NAME]``
    (replaced by its path, so a chat bound to it runs on its host)."""
    for name, project in config.projects.items():
        key = f"projects.{name}"
        if project.host == "docker" and not project.image:
            raise ConfigError('host "docker" needs image, e.g. image = "python:3.12-slim".', path=path, key=f"{key}.image")
        if project.host == "ssh" and not project.ssh:
            raise ConfigError('host "ssh" needs ssh, e.g. ssh = "user@box:/srv/app".', path=path, key=f"{key}.ssh")
    for name, value in config.gateway.projects.items():
        if value in config.projects:
            config.gateway.projects[name] = config.projects[value].path


class _AnyVariable(dict[str, str]):
    """An environment in which every variable is set: checks the form of references, not their values."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return ""


def _table(annotation: Any) -> Any:
    """``annotation`` without ``| None``."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table at ``loc`` (a path into Config) accepts; [] when ``loc`` is not a table."""
    current: Any = Config
    for part in loc:
        current = _table(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return []
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return []
    current = _table(current)
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _expected(err: ErrorDetails) -> str:
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        *table, name = err["loc"]
        nearest = difflib.get_close_matches(str(name), _known_keys(tuple(table)), n=1)
        if nearest:
            return f"is not a known setting; did you mean `{nearest[0]}`? (see the configuration reference in the README)"
        return "is not a known setting (check the spelling; see the configuration reference in the README)"
    if kind == "missing":
        return "is required"
    if err["loc"][:1] == ("mcp_servers",) and {"env", "headers"} & {str(part) for part in err["loc"]}:
        return f"expected {err.get('msg', 'a valid value').lower()}"  # never the value: it may be a secret
    return f"expected {err.get('msg', 'a valid value').lower()}, got {err.get('input')!r}"
