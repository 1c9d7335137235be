"""Retries with backoff, then fallback models: one Model made of several.

A failure can come after chunks were already yielded. Every restart is announced with a
``Retrying`` event first, so the caller can tell the user the partial output is void.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from core.config import RetryConfig
from core.models.base import ErrorKind, Model, ModelError, ModelEvent, ModelRequest, Retrying

__all__ = ["ResilientModel", "backoff_delay"]

# Another model can't fix a conversation that is too long, and the loop may want to compact it.
_FINAL = {ErrorKind.CONTEXT_TOO_LONG}
# A key or request the primary rejects may be fine for a fallback (another provider), but
# retrying the same model cannot help.
_FALL_THROUGH = {ErrorKind.AUTH, ErrorKind.BAD_REQUEST}


def backoff_delay(attempt: int, retry: RetryConfig, retry_after: float | None = None, *, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff for the retry after failed attempt ``attempt`` (1-based).

    Capped by ``retry.max_delay``, but never shorter than the server's ``retry_after``.
    """
    ceiling = min(retry.max_delay, retry.base_delay * (2 ** (attempt - 1)))
    delay = (rng or random).uniform(0, ceiling)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


class ResilientModel:
    """Tries ``models[0]``, retrying retryable failures; then each fallback in turn."""

    def __init__(
        self,
        models: Sequence[Model],
        retry: RetryConfig,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        *,
        rng: random.Random | None = None,
    ) -> None:
        if not models:
            raise ValueError("ResilientModel needs at least one model")
        self.models = list(models)
        self.retry = retry
        self.name = self.models[0].name
        self.family = self.models[0].family
        self._sleep = sleep
        self._rng = rng

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one step from the first model that completes it."""
        last: ModelError | None = None
        attempt = 0
        for position, model in enumerate(self.models):
            has_fallback = position + 1 < len(self.models)
            if last is not None:
                # Moving on to a fallback is a restart too: announce it, no wait.
                yield Retrying(error=last, attempt=attempt, delay=0.0, model=model.name)
            attempt = 0
            while True:
                attempt += 1
                events = model.stream(request)
                try:
                    async for event in events:
                        yield event
                    return
                except ModelError as exc:
                    last = exc if exc.model else _with_model(exc, model.name)
                finally:
                    # Close the inner stream (and its HTTP response) even when our consumer stops early.
                    close = getattr(events, "aclose", None)
                    if close is not None:
                        await close()
                if last.kind in _FINAL:
                    raise last
                if last.kind in _FALL_THROUGH or not last.retryable or attempt >= self.retry.max_attempts:
                    break
                if has_fallback and last.retry_after is not None and last.retry_after > self.retry.max_delay:
                    # The server asks for a longer wait than we'd ever choose; a fallback is quicker.
                    break
                delay = backoff_delay(attempt, self.retry, last.retry_after, rng=self._rng)
                yield Retrying(error=last, attempt=attempt, delay=delay, model=model.name)
                await self._sleep(delay)
        assert last is not None
        raise last

    async def aclose(self) -> None:
        """Close every underlying model."""
        for model in self.models:
            await model.aclose()


def _with_model(error: ModelError, name: str) -> ModelError:
    return ModelError(error.kind, error.message, status=error.status, retry_after=error.retry_after, model=name)
