"""The demo's throwaway project (a calculator with a bug) and the scripted model's side of it.

The script is a function of the request, not a fixed list: each step answers what the agent
actually sent back (a rejected edit, a failing command), so the session stays believable
whatever the user decides in ``--interactive`` mode.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PROMPT", "SEARCH_WORD", "demo_script", "write_project"]

PROMPT = "The tests of this little calculator (test_calc.py) fail. Find the bug in calc.py, fix it, and run the tests to show they pass."
# A word from the conversation, used to find the session again with a full-text search.
SEARCH_WORD = "calculator"

CALC = '''"""A tiny calculator."""


def add(a, b):
    return a - b


def multiply(a, b):
    return a * b
'''

TEST_CALC = """import unittest

from calc import add, multiply


class CalculatorTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_add_negative(self):
        self.assertEqual(add(-1, 1), 0)

    def test_multiply(self):
        self.assertEqual(multiply(4, 5), 20)


if __name__ == "__main__":
    unittest.main(verbosity=2)
"""

_READ, _EDIT, _TEST = "call_read_calc", "call_fix_add", "call_run_tests"
_BUGGY, _FIXED = "    return a - b\n", "    return a + b\n"
_PACE = {"chunk_size": 6, "delay": 0.012}  # stream like a model, but quickly


def write_project(root: Path) -> None:
    """Create the calculator project in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text(CALC, encoding="utf-8")
    (root / "test_calc.py").write_text(TEST_CALC, encoding="utf-8")


def demo_script(python: str = "python"):
    """A callable script for ScriptedOpenAIServer: read, fix, test, summarise."""
    test_command = f"{python} test_calc.py"

    def say(text: str, *calls: dict) -> dict:
        spec: dict = {"text": text, **_PACE}
        if calls:
            spec["tool_calls"] = list(calls)
        return spec

    def step(body: dict) -> dict:
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        if last.get("role") != "tool":
            return say(
                "I'll start by reading calc.py to see how the calculator works.",
                {"id": _READ, "name": "read_file", "arguments": {"path": "calc.py"}},
            )
        result = _text(last.get("content"))
        call = last.get("tool_call_id")
        if call == _READ:
            if _BUGGY.strip() not in result:
                return say("calc.py doesn't contain the bug I expected, so I'll leave it as it is.")
            return say(
                "Found it: `add` subtracts instead of adding (`return a - b`). That breaks both addition tests. I'll fix that one line.",
                {
                    "id": _EDIT,
                    "name": "edit_file",
                    "arguments": {"path": "calc.py", "old_string": _BUGGY, "new_string": _FIXED},
                },
            )
        if call == _EDIT:
            if "rejected" in result.lower() or not result.startswith("Edited"):
                return say("Understood: I left calc.py unchanged. The fix is one line: `return a + b` in `add`.")
            return say(
                "Now I'll run the tests to check the fix.",
                {"id": _TEST, "name": "run_command", "arguments": {"command": test_command}},
            )
        if call == _TEST:
            if result.startswith("exit code 0"):
                return say(
                    "All three tests pass. Summary: the calculator's `add` returned `a - b`; "
                    "it now returns `a + b`, and `python test_calc.py` runs green."
                )
            if "rejected" in result.lower():
                return say("Okay, I didn't run the tests. The fix to `add` is in place; run `python test_calc.py` to check it.")
            return say("The tests still fail after the fix; the output above shows where. I'd look at it next.")
        return say("Done.")

    return step


def _text(content: object) -> str:
    """A tool message's content as text (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
