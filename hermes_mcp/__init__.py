"""The MCP surface (Claude Desktop, Cursor): not yet available; ``hermes-mcp`` says so and exits."""
