"""``hermes-mcp``: a placeholder until the MCP surface ships. Exits 2 and points at hermes-acp."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]

MESSAGE = "hermes-mcp is not yet available in this version; use hermes-acp from your editor."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hermes-mcp",
        description="MCP server for Claude Desktop, Cursor and other MCP clients. Not yet available in this version.",
    )
    # Unknown arguments (an MCP client's --stdio, say) still get the explanation, not a usage error.
    parser.parse_known_args(argv)
    print(MESSAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
