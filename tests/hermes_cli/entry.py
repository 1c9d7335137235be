"""``hermes-editor`` run as a user runs it: the installed console script in a subprocess, answers on stdin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent / "hermes-editor"


def hermes_editor(
    *args: str, input: str = "", env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``hermes-editor ARGS`` with the test's state home (HERMES_EDITOR_HOME from the environment)."""
    assert BIN.exists(), f"{BIN} is missing: install the project (pip install -e .[test])"
    return subprocess.run(
        [str(BIN), *args],
        input=input,
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_QUIET": "1", **(env or {})},
        cwd=cwd,
        timeout=90,
        # No controlling terminal: nothing may fall back to reading /dev/tty.
        start_new_session=True,
    )
