"""Model families and the few lines of prompt guidance each one needs, as data.

Families differ in habits a prompt can correct: some under-use tools (they describe an edit instead
of making it, or guess at a file instead of reading it), some over-explain, some stop to ask about
the obvious next step. :data:`FAMILIES` says which model names belong to a family and what its
guidance is; :func:`guidance_for` picks it for a model: the family its provider's profile names
(``[providers.NAME] family = "..."``, or the built-in profile's: Anthropic serves Claude), else the
one its name shows.

The guidance is a section of the system prompt (``core.agent.session``), constant for a session's
model: a provider caches per model, so a model switch starts a new cache anyway, and the section
changes with it at the next turn boundary, never within a turn. A model of no known family gets
no guidance.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAMILIES", "Family", "family_of", "guidance_for"]


@dataclass(frozen=True, slots=True)
class Family:
    """A model family: the names it covers and the prompt lines it gets."""

    name: str
    # A model name (its last "/" part, lowercased, without a fine-tune's "ft:") that starts with one of these belongs here.
    prefixes: tuple[str, ...]
    guidance: str

    def section(self) -> str:
        """The system prompt section for this family."""
        return f"# Working notes for this model\n{self.guidance}"


_OPEN_WEIGHTS = """- Use the tools: read a file before you say what it holds, and change files with the edit tools instead of printing \
code for the user to paste.
- Make each tool call in the tool-call format, never as JSON or XML in your reply, and wait for its result."""

FAMILIES: tuple[Family, ...] = (
    Family(
        "claude",
        ("claude",),
        """- Do what was asked and no more: no extra files, features or refactors the user did not ask for.
- Keep the final report to a few lines: the user has seen every diff.""",
    ),
    Family(
        "gpt",
        ("gpt", "chatgpt", "o1", "o3", "o4", "codex"),
        """- Keep going until the task is done; do not stop to ask before an obvious next step.
- Check with tools (read, search, run the tests) rather than assume; say what you verified.""",
    ),
    Family(
        "gemini",
        ("gemini",),
        """- Act through tools instead of describing what you would do, and skip preambles about what comes next.
- Keep explanations short: a few sentences unless the user asks for more.""",
    ),
    Family(
        "deepseek",
        ("deepseek",),
        """- Think briefly, then act: call the tools rather than reason about what a file probably contains.
- Make each tool call in the tool-call format, never as JSON or XML in your reply.""",
    ),
    Family(
        "open-weights",
        ("qwen", "qwq", "llama", "codellama", "mistral", "mixtral", "codestral", "devstral", "gemma", "phi", "granite", "starcoder"),
        _OPEN_WEIGHTS,
    ),
)


def family_of(label: str) -> Family | None:
    """The family of a model label ("provider:model", or a bare model name); None when unknown."""
    model = label.partition(":")[2] or label
    name = model.lower().removeprefix("ft:").rsplit("/", 1)[-1]
    return next((f for f in FAMILIES if name.startswith(f.prefixes)), None)


def guidance_for(label: str, family: str | None = None) -> str:
    """The prompt section for the model ``label``: of ``family`` when its profile names one (``"none"``:
    no notes), else of the family its name shows ("" for a model of no known family)."""
    found = next((f for f in FAMILIES if f.name == family), None) if family is not None else family_of(label)
    return found.section() if found is not None else ""
