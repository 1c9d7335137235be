"""The agent core. It knows no surface: ``hermes_acp``, ``hermes_mcp``, ``hermes_gateway`` and
``hermes_cli`` import it, never the other way round.

Rooms, top to bottom; each may import only the rooms below it (import-linter checks this):

``agent/``     the tool-calling loop, the session context it reads (titles, nudges, nested
               AGENTS.md), the system prompt, and ``build_agent`` — the one builder every
               surface calls.
``learning/``  project context (AGENTS.md chain, SOUL.md), memory, skills and their curator,
               screening of learned text, the gate learning writes pass, history compression.
``tools/``     the ``@tool`` decorator, ``ToolContext`` (the only door a tool has to the
               world), dispatch and diffs, and tools joined from MCP servers. A new tool goes
               in a toolset (``toolsets/``), written against ``ToolContext``.
``policy/``    approvals (modes, rules, the broker that asks) and the command grader.
``host/``      where commands run and files change: the local host, the OS sandbox,
               checkpoints. A new host (docker, ssh) is a module here implementing ``Host``.
``models/``    the ``Model`` protocol, the OpenAI-compatible and Anthropic adapters, retry and
               fallback.
``store/``     SQLite: sessions, messages and their full-text search, approvals, cron jobs and
               their schedules, the gateway's tables.

The ground floor, importable by every room and importing none: ``config`` (with
``learning_config``), ``messages``, ``events``, ``paths``, ``redaction``, ``logs``,
``state_home``, ``locked_json``, ``tokens``, ``version``.

What only surfaces use lives outside: ``surface_support/`` (approval watching, pairing, the
interactive set-up, reading the configuration). A new chat platform is an adapter in
``hermes_gateway/``.
"""
