"""The price table, its config override, local servers at zero, and the cost of one request."""

from __future__ import annotations

import pytest

from core.config import load_config
from core.messages import Usage
from core.models.pricing import PRICES_AS_OF, TABLE, cost_of, price_for, price_hint


def config_with(tmp_path, text: str):
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={})


@pytest.mark.parametrize(
    ("model", "entry"),
    [
        ("gpt-4.1", "gpt-4.1"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("anthropic/claude-haiku-4-5", "claude-haiku-4-5"),
    ],
)
def test_the_longest_matching_entry_prices_a_model(tmp_path, model, entry):
    config = config_with(
        tmp_path, '[providers.openai]\napi_key = "sk-test-123456789"\n[providers.openrouter]\napi_key = "sk-or-123456789"\n'
    )
    provider = "openrouter" if "/" in model else "openai"
    assert price_for(config.model_ref(f"{provider}:{model}"), config.pricing) == TABLE[entry]


def test_unknown_models_have_no_price_and_the_hint_says_how_to_set_one(tmp_path):
    config = config_with(tmp_path, '[providers.openai]\napi_key = "sk-test-123456789"\n')
    assert price_for(config.model_ref("openai:gpt-4"), {}) is None  # not gpt-4o nor gpt-4.1
    assert price_for(config.model_ref("openai:o3x"), {}) is None
    hint = price_hint("openai:gpt-4")
    assert "unknown price for openai:gpt-4" in hint and '[pricing."openai:gpt-4"]' in hint
    assert PRICES_AS_OF[:4].isdigit()


def test_config_overrides_the_table_and_local_servers_are_free(tmp_path):
    config = config_with(
        tmp_path,
        '[providers.openai]\napi_key = "sk-test-123456789"\n'
        '[providers.ollama]\nbase_url = "http://127.0.0.1:11434/v1"\n'
        '[pricing."openai:gpt-4.1"]\ninput = 1.5\noutput = 6\ncache_read = 0.2\n'
        '[pricing."my-model"]\ninput = 3\noutput = 4\n',
    )
    override = price_for(config.model_ref("openai:gpt-4.1"), config.pricing)
    assert override is not None and (override.input, override.output, override.cache_read, override.cache_write) == (1.5, 6, 0.2, 1.5)
    bare = price_for(config.model_ref("openai:my-model"), config.pricing)
    assert bare is not None and (bare.input, bare.output) == (3, 4)
    local = price_for(config.model_ref("ollama:qwen3:8b"), config.pricing)
    assert local is not None and cost_of(Usage(1000, 1000), local) == 0.0


def test_a_bad_price_is_refused_at_load(tmp_path):
    from core.config import ConfigError

    with pytest.raises(ConfigError, match=r"pricing\.openai:gpt-4\.1\.input"):
        config_with(tmp_path, '[pricing."openai:gpt-4.1"]\ninput = -1\noutput = 2\n')


def test_cost_counts_cached_tokens_at_their_own_rates():
    price = TABLE["claude-sonnet-4"]  # $3 in, $15 out, $0.30 cache read, $3.75 cache write
    # input_tokens is the whole prompt: 1000 fresh + 2000 read from the cache + 400 written to it
    usage = Usage(input_tokens=3400, output_tokens=100, cache_read_tokens=2000, cache_write_tokens=400)
    expected = (1000 * 3 + 2000 * 0.30 + 400 * 3.75 + 100 * 15) / 1_000_000
    assert cost_of(usage, price) == pytest.approx(expected)
