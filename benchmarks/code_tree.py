"""The tree a benchmark measures, for benchmarks that import its code in their own process.

``--code DIR`` names another checkout of this repository; it is read from ``sys.argv`` before
anything of the tree is imported (argparse runs later), and the tree goes first on ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["use_code_tree"]


def use_code_tree() -> str:
    """Put the tree to measure (``--code DIR``, else this one) first on ``sys.path``; its path."""
    tree = str(Path(__file__).resolve().parents[1])
    for i, arg in enumerate(sys.argv):
        if arg == "--code" and i + 1 < len(sys.argv):
            tree = str(Path(sys.argv[i + 1]).resolve())
        elif arg.startswith("--code="):
            tree = str(Path(arg.split("=", 1)[1]).resolve())
    sys.path.insert(0, tree)
    return tree
