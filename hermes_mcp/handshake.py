"""The ``initialize`` answer, built without the MCP SDK, so that a client gets it in milliseconds.

Importing the SDK takes about half a second on a small machine (its protocol types for two
eras). ``hermes-mcp`` answers the client's ``initialize`` from here while the SDK loads in a
background thread, then hands the same ``initialize`` to the SDK (whose own answer is
dropped) so that its connection state is exactly as if it had answered. A test checks that
both answers are identical, so this module cannot drift from the SDK silently.

Standard library only: this runs before anything heavy is imported.
"""

from __future__ import annotations

import json
from typing import Any

from core.version import version

__all__ = [
    "HANDSHAKE_VERSIONS",
    "INSTRUCTIONS",
    "LATEST_HANDSHAKE_VERSION",
    "SERVER_NAME",
    "SERVER_TITLE",
    "capabilities",
    "initialize_answer",
    "initialize_request_id",
    "server_version",
]

SERVER_NAME = "hermes"
SERVER_TITLE = "Hermes"
# The SDK's mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS (a test keeps them equal).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[-1]

INSTRUCTIONS = """Hermes is a coding agent with its own history, skills and memory, shared with the \
user's editors. Give it work in a project directory: it reads and edits files, runs commands in a \
sandbox, keeps a plan, uses and adds to its skills and memory, searches past sessions, schedules jobs.
- ask: a small request that finishes within a minute (returns the result, or a task id to follow).
- task_start, then task_wait until the status is done: longer work. Results list changed files as diffs.
- cwd must be a project folder the user opened in this client (a root) or listed in [mcp] projects \
of Hermes' config.toml; never / or the home directory.
- mode: ask (the default) asks the user before each change and command; accept-edits lets edits and \
commands the sandbox contains go ahead (the network, files outside the project and dangerous commands \
still ask); read-only changes nothing.
- needs_approval: a change or command waits for the user, and only the user answers it, never you. Clients \
with elicitation show a form; otherwise show the user the approval and ask them to answer in a \
terminal (hermes-editor approvals allow ID, or deny ID), in their editor, or on their phone.
- sessions_search / sessions_list / session_read: past conversations from every surface.
- skills_list / skill_view, memory_read / memory_add: what the agent knows how to do and remembers."""


def server_version() -> str:
    """The installed hermes-editor version (read once)."""
    return version()


def capabilities() -> dict[str, Any]:
    """What this server offers in the handshake era: log messages, completions, resource subscriptions, list-changed notices for prompts and resources."""
    return {
        "logging": {},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "tools": {"listChanged": False},
        "completions": {},
        # ask as a protocol task (hermes_mcp.protocol_tasks)
        "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
    }


def initialize_request_id(line: bytes | bytearray | str) -> int | str | None:
    """The id of a well-formed ``initialize`` request on this line, else None.

    Anything unusual (a batch, missing fields, odd types) returns None, and the SDK answers it
    itself with the proper error.
    """
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or message.get("method") != "initialize":
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        return None
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("protocolVersion"), str):
        return None
    if not isinstance(params.get("capabilities"), dict):
        return None
    info = params.get("clientInfo")
    if not isinstance(info, dict) or not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
        return None
    return request_id


def initialize_answer(line: bytes | bytearray | str) -> bytes | None:
    """The JSON-RPC response line for an ``initialize`` request, or None to leave it to the SDK."""
    request_id = initialize_request_id(line)
    if request_id is None:
        return None
    requested = json.loads(line)["params"]["protocolVersion"]
    # The SDK's rule: the client's version when we speak it, else our newest handshake version.
    version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION
    result = {
        "protocolVersion": version,
        "capabilities": capabilities(),
        "serverInfo": {"name": SERVER_NAME, "title": SERVER_TITLE, "version": server_version()},
        "instructions": INSTRUCTIONS,
    }
    response = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return (json.dumps(response, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
