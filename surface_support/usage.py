"""A session's tokens and cost as ``/cost`` shows them, its subagents' included and named."""

from __future__ import annotations

from core.messages import Usage

__all__ = ["subagents_cost", "token_lines"]


def token_lines(total: Usage, subagents: Usage) -> list[str]:
    """The token lines of ``/cost`` for ``total`` (the session's with its subagents'), and a line
    for the subagents' share when they used any."""
    lines = [
        f"Input tokens: {total.input_tokens:,} (cache reads {total.cache_read_tokens:,}, cache writes {total.cache_write_tokens:,})",
        f"Output tokens: {total.output_tokens:,}",
    ]
    if subagents.input_tokens or subagents.output_tokens:
        lines.append(f"Of which subagents: {subagents.input_tokens:,} input, {subagents.output_tokens:,} output tokens")
    return lines


def subagents_cost(subagents: Usage) -> str:
    """What follows the cost when subagents cost something: " (of which subagents: $x)"."""
    return f" (of which subagents: ${subagents.cost_usd:.4f})" if subagents.cost_usd else ""
