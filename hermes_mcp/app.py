"""The MCP server object: tools, resources and prompts over one ``Runtime``, and how it is served."""

from __future__ import annotations

import functools
import logging
from typing import Any

from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus

from hermes_mcp import handshake
from hermes_mcp.completions import install_completions
from hermes_mcp.logs import install_logging
from hermes_mcp.protocol_tasks import install_protocol_tasks, with_task_support
from hermes_mcp.resources import ChangeNotifier, dynamic_resources, register_resources, skill_prompt, skill_prompts
from hermes_mcp.runtime import Runtime
from hermes_mcp.sampling import remember_request
from hermes_mcp.tools import register_tools

__all__ = ["HermesServer", "build_server"]

log = logging.getLogger(__name__)

NOTIFICATIONS = NotificationOptions(prompts_changed=True, resources_changed=True)


class HermesServer(MCPServer):
    """MCPServer whose resource and prompt lists are read fresh (skills and sessions change)."""

    def __init__(self, runtime: Runtime, notifier: ChangeNotifier, bus: InMemorySubscriptionBus) -> None:
        super().__init__(
            name=handshake.SERVER_NAME,
            title=handshake.SERVER_TITLE,
            version=handshake.server_version(),
            instructions=handshake.INSTRUCTIONS,
            subscriptions=bus,
            middleware=[notifier.middleware],
        )
        self.runtime = runtime
        self.notifier = notifier
        lowlevel = self._lowlevel_server
        # Every transport (stdio here, the HTTP session manager) asks the low-level server for
        # its initialize options; list-changed flags are not derived from handlers in the
        # handshake era, so they are bound in here once.
        lowlevel.create_initialization_options = functools.partial(  # type: ignore[method-assign]
            lowlevel.create_initialization_options, NOTIFICATIONS
        )

    @property
    def lowlevel(self) -> Any:
        """The SDK's low-level server (what transports run)."""
        return self._lowlevel_server

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        # An unknown tool is protocol misuse (the spec's list of JSON-RPC errors), not something
        # for the model to read in a result as the SDK would have it.
        if self._tool_manager.get_tool(name) is None:
            from mcp.shared.exceptions import MCPError
            from mcp_types import INVALID_PARAMS

            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}", data={"name": name})
        return await super().call_tool(name, arguments, context)

    async def list_tools(self) -> list[Any]:
        return with_task_support(await super().list_tools())  # ask may run as a protocol task (2025-11-25)

    async def list_resources(self) -> list[Any]:
        return [*(await super().list_resources()), *(await dynamic_resources(self.runtime))]

    async def list_prompts(self) -> list[Any]:
        return await skill_prompts(self.runtime)

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        return await skill_prompt(self.runtime, name, arguments)


def build_server(runtime: Runtime) -> HermesServer:
    """The server with every tool, resource template and prompt registered."""
    bus = InMemorySubscriptionBus()
    notifier = ChangeNotifier(bus)
    server = HermesServer(runtime, notifier, bus)
    server.middleware.append(remember_request)  # whose capabilities decide on the client's model (sampling)
    register_tools(server, runtime)
    register_resources(server, runtime)
    notifier.attach(server, runtime)  # resources/subscribe and resources/unsubscribe
    install_logging(server, runtime)
    install_completions(server, runtime)
    install_protocol_tasks(server, runtime)
    return server
