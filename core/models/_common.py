"""What both wire adapters share: error classification, credentials, tool-argument parsing.

Both SDKs share one shape (``APIStatusError`` with ``status_code``, ``response`` and ``body``;
``APIConnectionError``; ``APITimeoutError``) and both ride on an httpx-style transport, so
classification works by duck typing and never imports an SDK. The chat-completions adapter
talks HTTP itself (httpx) and reports a provider's error answers as ``ProviderHTTPError``.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from core.config import ModelRef
from core.models.base import ErrorKind, ModelError, ModelEvent, ModelRequest
from core.models.pricing import Price, cost_of

__all__ = ["ProviderHTTPError", "SdkModel", "api_key", "classify_error", "parse_arguments", "redact"]

_CONTEXT_WORDS = re.compile(
    r"context[ _-]?(length|window)|maximum context|too many tokens|prompt is too long|"
    r"input is too long|exceeds? the (model's )?(maximum|max)|token limit|reduce the length",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(Bearer\s+)[^\s'\"]+", re.IGNORECASE)
_SDK_MODULES = ("openai", "anthropic", "httpx", "httpx2", "httpcore", "h11", "anyio")
_MAX_MESSAGE = 500


class ProviderHTTPError(Exception):
    """A provider's error answer: an HTTP status of 400 or more, or an error object inside a
    200 stream (``status_code`` None). ``body`` is the error object (the JSON's ``error`` when
    there is one) or the body's text; ``headers`` are the response's, names lower-cased."""

    def __init__(self, message: str, *, status_code: int | None, body: object, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.body = body
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        code = body.get("code") if isinstance(body, dict) else None
        self.code = str(code) if code is not None else None


def redact(text: str, secrets: Iterable[str]) -> str:
    """Remove every configured secret (and any bearer token) from ``text``."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    return _BEARER.sub(r"\1[redacted]", text)


def classify_error(exc: BaseException, *, model: str, secrets: Iterable[str] = ()) -> ModelError | None:
    """The ModelError for a provider failure, or None when ``exc`` is not one (a bug, say)."""
    if isinstance(exc, ModelError):
        return exc
    secrets = list(secrets)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    err_type, api_message = _error_body(getattr(exc, "body", None))
    names = {cls.__name__ for cls in type(exc).__mro__}

    def make(kind: ErrorKind, detail: str, *, retry_after: float | None = None) -> ModelError:
        text = redact(detail, secrets).strip() or type(exc).__name__
        if len(text) > _MAX_MESSAGE:
            text = text[:_MAX_MESSAGE] + "..."
        text = text.rstrip(".")  # ModelError.user_message adds its own full stop
        # A status of 200 means the error arrived inside the stream; don't report it as HTTP 200.
        shown = status if status is not None and status >= 400 else None
        return ModelError(kind, text, status=shown, retry_after=retry_after, model=model)

    is_api_error = isinstance(exc, ProviderHTTPError) or "APIError" in names or "APIStatusError" in names
    if is_api_error and "APIConnectionError" not in names and "APIResponseValidationError" not in names:
        detail = api_message or _sdk_message(exc)
        if err_type:
            detail = f"{err_type}: {detail}"
        if status == 529 or err_type == "overloaded_error":
            return make(ErrorKind.OVERLOADED, detail)
        if status in (401, 403) or err_type in ("authentication_error", "permission_error"):
            return make(ErrorKind.AUTH, detail)
        if status == 429 or err_type == "rate_limit_error":
            return make(ErrorKind.RATE_LIMIT, detail, retry_after=_retry_after(exc))
        client_side = status is None or status < 500
        if status == 413 or err_type == "request_too_large" or (client_side and _mentions_context(exc, api_message)):
            return make(ErrorKind.CONTEXT_TOO_LONG, detail)
        if status == 408:
            return make(ErrorKind.TIMEOUT, detail)
        if (status is not None and status >= 500) or err_type in ("api_error", "server_error"):
            return make(ErrorKind.SERVER, detail)
        if status is not None and 400 <= status < 500:
            return make(ErrorKind.BAD_REQUEST, detail)
        # An error event inside a 200 stream with no telling type: treat it as the server's fault.
        return make(ErrorKind.SERVER, detail)

    if "APIResponseValidationError" in names or isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return make(ErrorKind.BAD_RESPONSE, f"unreadable response from the provider ({type(exc).__name__}: {exc})")
    if "APITimeoutError" in names or "TimeoutException" in names or isinstance(exc, TimeoutError):
        return make(ErrorKind.TIMEOUT, f"no response within the configured timeout ({type(exc).__name__})")
    if "APIConnectionError" in names or "TransportError" in names or "StreamError" in names or isinstance(exc, ConnectionError):
        cause = exc.__cause__ or exc.__context__
        why = f"{type(cause).__name__}: {cause}" if cause is not None else _sdk_message(exc)
        return make(ErrorKind.CONNECTION, f"connection to the provider failed or was cut ({why})")
    if type(exc).__module__.split(".")[0] in _SDK_MODULES:
        # Any other SDK complaint (a missing credential, an unexpected payload) is not a bug of ours.
        return make(ErrorKind.BAD_RESPONSE, f"{type(exc).__name__}: {exc}")
    if isinstance(exc, ValueError) and "pydantic" in type(exc).__module__:
        return make(ErrorKind.BAD_RESPONSE, f"unexpected response shape ({exc})")
    return None


def _error_body(body: object) -> tuple[str | None, str | None]:
    """(error type, error message) from either SDK's error body."""
    if not isinstance(body, dict):
        return None, body if isinstance(body, str) and body else None
    nested = body.get("error")
    inner: dict[str, Any] = nested if isinstance(nested, dict) else body
    kind = inner.get("type") or inner.get("code")
    message = inner.get("message")
    return (str(kind) if kind else None), (str(message) if message else None)


def _sdk_message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc)


def _mentions_context(exc: BaseException, api_message: str | None) -> bool:
    code = getattr(exc, "code", None)
    if code == "context_length_exceeded":
        return True
    return bool(_CONTEXT_WORDS.search(api_message or _sdk_message(exc)))


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if isinstance(exc, ProviderHTTPError):
        headers: Any = exc.headers
    else:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def api_key(ref: ModelRef) -> str:
    """The key to send: the configured one, a placeholder for keyless servers, else an auth error."""
    if ref.config.api_key is not None and ref.config.api_key.get_secret_value():
        return ref.config.api_key.get_secret_value()
    profile = ref.config.resolved_profile(ref.provider)
    if not profile.needs_key:
        # The SDKs insist on some key; local servers ignore it.
        return "not-needed"
    where = f"set {profile.key_env} or " if profile.key_env else ""
    raise ModelError(
        ErrorKind.AUTH,
        f"no API key configured for provider '{ref.provider}'; {where}add api_key to [providers.{ref.provider}]",
        model=ref.label,
    )


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as a dict, plus the raw text when it was not a JSON object."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, raw
    return (value, None) if isinstance(value, dict) else ({}, raw)


class SdkModel:
    """The shape both adapters share: a lazy SDK client, one stream wrapper, classified errors.

    A subclass names its SDK client class (``_client_class``), opens the streaming response
    (``_open``) and gives the assembler that turns raw events into model events.
    """

    def __init__(self, ref: ModelRef, *, secrets: Sequence[str] = (), price: Price | None = None) -> None:
        self.ref = ref
        self.name = ref.label
        # What its tokens cost (core.models.pricing); None: unknown, unless the provider reports it.
        self.price = price
        self.profile = ref.config.resolved_profile(ref.provider)
        self.family = self.profile.family
        self.base_url = ref.config.base_url or self.profile.base_url
        self._secrets = list(secrets)
        self._client: Any = None

    def _client_class(self) -> Any:
        raise NotImplementedError

    async def _open(self, client: Any, request: ModelRequest) -> Any:
        raise NotImplementedError

    def _assembly(self) -> Any:
        raise NotImplementedError

    def _get_client(self) -> Any:
        if self._client is None:
            key = api_key(self.ref)
            self._secrets.append(key)
            # Retries belong to ResilientModel, which can tell the user and fall back.
            self._client = self._client_class()(
                api_key=key,
                base_url=self.base_url,
                max_retries=0,
                timeout=self.ref.config.timeout,
                default_headers=dict(self.profile.extra_headers) or None,
            )
        return self._client

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one step: text, thinking and tool-call chunks, then one ResponseDone."""
        try:
            response = await self._open(self._get_client(), request)
            async with response:
                assembly = self._assembly()
                async with aclosing(assembly.feed(response)) as events:
                    async for event in events:
                        yield event
            done = assembly.finish(self.name)
            if done.usage.cost_usd is None and self.price is not None:
                done.usage.cost_usd = cost_of(done.usage, self.price)
            yield done
        except Exception as exc:
            error = classify_error(exc, model=self.name, secrets=self._secrets)
            if error is None:
                raise
            raise error from None

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.close()
            self._client = None
