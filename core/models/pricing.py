"""What a request cost: a small table of list prices, ``[pricing]`` overrides, and local servers at zero.

Prices are US dollars per million tokens. The table holds the providers' published list
prices for common OpenAI and Anthropic models as of ``PRICES_AS_OF``; prices change, so
``[pricing."provider:model"]`` in config.toml (or ``[pricing."model"]`` for any provider)
takes precedence. A provider that reports the cost itself (OpenRouter's ``usage.cost``) is
believed over both. A model matches a table entry when its name starts with the entry's and
the next character is not a letter or digit (``claude-sonnet-4-20250514`` is
``claude-sonnet-4``; ``gpt-4o`` is not ``gpt-4``); the longest such entry wins, and an
OpenRouter-style vendor prefix (``anthropic/``) is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.messages import Usage

if TYPE_CHECKING:
    from collections.abc import Mapping

    from core.config import ModelRef, PriceConfig

__all__ = ["PRICES_AS_OF", "Price", "cost_of", "price_for", "price_hint"]

PRICES_AS_OF = "2025-11"

# Profiles of servers that run on the user's own machine: nothing to pay per token.
_LOCAL_PROFILES = frozenset({"ollama", "llamacpp", "vllm", "lmstudio"})


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens: uncached input, output, cached input read, input written to a cache."""

    input: float
    output: float
    cache_read: float
    cache_write: float


def _p(input: float, output: float, cache_read: float | None = None, cache_write: float | None = None) -> Price:
    return Price(input, output, input if cache_read is None else cache_read, input if cache_write is None else cache_write)


# Published list prices (standard tier) as of PRICES_AS_OF. OpenAI bills no cache writes;
# Anthropic bills 5-minute cache writes at 1.25x input and cache reads at 0.1x input.
TABLE: dict[str, Price] = {
    # OpenAI
    "gpt-5": _p(1.25, 10.00, 0.125),
    "gpt-5-mini": _p(0.25, 2.00, 0.025),
    "gpt-5-nano": _p(0.05, 0.40, 0.005),
    "gpt-4.1": _p(2.00, 8.00, 0.50),
    "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "gpt-4o": _p(2.50, 10.00, 1.25),
    "gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "o3": _p(2.00, 8.00, 0.50),
    "o3-mini": _p(1.10, 4.40, 0.55),
    "o4-mini": _p(1.10, 4.40, 0.275),
    # Anthropic
    "claude-opus-4-5": _p(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-1": _p(15.00, 75.00, 1.50, 18.75),
    "claude-opus-4": _p(15.00, 75.00, 1.50, 18.75),
    "claude-sonnet-4-5": _p(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4": _p(3.00, 15.00, 0.30, 3.75),
    "claude-3-7-sonnet": _p(3.00, 15.00, 0.30, 3.75),
    "claude-haiku-4-5": _p(1.00, 5.00, 0.10, 1.25),
    "claude-3-5-haiku": _p(0.80, 4.00, 0.08, 1.00),
}


def _matches(name: str, entry: str) -> bool:
    return name == entry or (name.startswith(entry) and not name[len(entry)].isalnum())


def _lookup(name: str, table: Mapping[str, Price]) -> Price | None:
    found = [entry for entry in table if _matches(name, entry)]
    return table[max(found, key=len)] if found else None


def price_for(ref: ModelRef, overrides: Mapping[str, PriceConfig] | None = None) -> Price | None:
    """The price of ``ref``'s tokens: ``[pricing]`` first (``provider:model``, then ``model``), then
    zero for a local server, then the table; None when unknown."""
    overrides = overrides or {}
    for key in (ref.label, ref.model):
        given = overrides.get(key)
        if given is not None:
            return _p(given.input, given.output, given.cache_read, given.cache_write)
    if (ref.config.profile or ref.provider) in _LOCAL_PROFILES:
        return Price(0.0, 0.0, 0.0, 0.0)
    name = ref.model.rsplit("/", 1)[-1].lower()
    return _lookup(name, TABLE)


def cost_of(usage: Usage, price: Price) -> float:
    """US dollars for one request. ``input_tokens`` counts the whole prompt, cached parts included."""
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    fresh = max(0, usage.input_tokens - cached)
    total = (
        fresh * price.input
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
        + usage.output_tokens * price.output
    )
    return total / 1_000_000


def price_hint(label: str) -> str:
    """What to tell a user whose model has no known price."""
    return (
        f'unknown price for {label}; set it in config.toml as [pricing."{label}"] input = ..., output = ... (US dollars per million tokens)'
    )
