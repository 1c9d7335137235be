"""Tools: the ``@tool`` decorator, ``ToolContext`` (the one door a tool reaches the world through),
dispatch, file diffs, and tools joined from MCP servers.

May import ``policy``, ``host``, ``models``, ``store`` and the ground modules.
"""
