"""How a server started by hand ends on Ctrl-C: by SIGINT, as Python would, without the traceback."""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["end_by_sigint"]


def end_by_sigint() -> int:
    """End this process by SIGINT, as an unhandled KeyboardInterrupt would, without its traceback
    (the shell sees status 130). Returns 130 should the signal not end it."""
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    return 130
