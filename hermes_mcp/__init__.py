"""The MCP surface (Claude Desktop, Cursor, any MCP client): the agent, its history, skills and memory.

``hermes-mcp`` runs ``hermes_mcp.__main__``; the server itself is built in ``hermes_mcp.app``.
Nothing is imported here: the first answer to a client must not wait for the MCP SDK.
"""

__all__: list[str] = []
