"""Questions a host asks the user while a tool call runs (an SSH server's unknown host key).

The running call's tool context sets ``host_questions``; a host reads it when it needs an answer.
None: nobody can be asked, and the host refuses what it would have asked about.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable

__all__ = ["Ask", "host_questions"]

# (title, detail) -> whether the user said yes.
Ask = Callable[[str, str], Awaitable[bool]]

host_questions: contextvars.ContextVar[Ask | None] = contextvars.ContextVar("host_questions", default=None)
