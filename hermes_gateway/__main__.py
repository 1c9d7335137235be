"""``hermes-gateway``: a placeholder until the messaging gateway ships. Exits 2 and points at hermes-acp."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]

MESSAGE = "hermes-gateway is not yet available in this version; use hermes-acp from your editor."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hermes-gateway",
        description="Messaging gateway (Telegram) and cron scheduler. Not yet available in this version.",
    )
    # Unknown arguments (from a service unit written for a later version) still get the explanation.
    parser.parse_known_args(argv)
    print(MESSAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
