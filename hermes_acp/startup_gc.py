"""The cyclic garbage collector waits while hermes-acp starts.

Loading the config, the ACP SDK, the server and the agent core builds several hundred thousand
objects that nearly all stay alive; the collector walked them about 185 times before the first
answer (some 40 ms of a quiet machine's processor time) and found a few thousand cycles. It is paused from the start
of the server until the first prompt has been answered (or :data:`LIMIT` seconds have passed,
when no prompt comes), then resumed with everything alive at that point frozen out of later
collections (:func:`gc.freeze`), so that they walk only what the sessions make. Reference
counting frees most garbage meanwhile; only cycles wait.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["LIMIT", "pause", "resume"]

LIMIT = 60.0  # seconds: the collector resumes by then even when no prompt has come

_lock = threading.Lock()
_paused = False


def pause(limit: float = LIMIT) -> None:
    """Pause the collector until :func:`resume` (or ``limit`` seconds); nothing if it is already off."""
    global _paused
    with _lock:
        if _paused or not gc.isenabled():
            return  # disabled by whoever embeds us: theirs to turn back on
        gc.disable()
        _paused = True
    timer = threading.Timer(limit, resume)
    timer.daemon = True
    timer.name = "hermes-acp-gc-resume"
    timer.start()


def resume() -> None:
    """Turn the collector back on, everything alive now frozen; nothing unless :func:`pause` paused it."""
    global _paused
    with _lock:
        if not _paused:
            return
        _paused = False
        gc.freeze()
        gc.enable()
