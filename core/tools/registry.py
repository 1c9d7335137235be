"""Tools: typed async functions with metadata (``@tool``), and what they return."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from core.events import ToolContent, ToolKind
from core.messages import FileDiff
from core.models.base import ToolSpec
from core.tools.context import ToolContext

__all__ = ["Tool", "ToolFunc", "ToolOutput", "tool"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ToolOutput:
    """What a tool returns: text for the model, content and diffs for the user."""

    text: str
    content: list[ToolContent] = field(default_factory=list)
    diffs: list[FileDiff] = field(default_factory=list)


ToolFunc = Callable[["ToolContext", Any], Awaitable["ToolOutput | str"]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    func: ToolFunc
    kind: ToolKind
    read_only: bool
    # A short human title from the arguments, e.g. "Read src/app.py".
    title: Callable[[Any], str]
    # Paths the call touches, relative ones resolved against the session cwd.
    paths: Callable[[Any], list[str]]
    # The toolsets that list this tool (``toolsets.TOOLSETS`` says it, once).
    toolsets: frozenset[str] = frozenset()
    # The capability groups it belongs to (``toolsets.GROUPS``: "file", "terminal", "web", ...), by
    # which skills name what they need or stand in for; a session with the tool has its groups.
    groups: frozenset[str] = frozenset()

    def spec(self) -> ToolSpec:
        schema = self.args_model.model_json_schema()
        defs = schema.pop("$defs", {})
        return ToolSpec(self.name, self.description, _compact(schema, defs))


def _compact(node: Any, defs: dict[str, Any]) -> Any:
    """A schema without titles, without defaults that go without saying ("", false, 0, [], null),
    with an optional argument's ``anyOf [X, null]`` written as X (leaving it out means null), and
    with nested models inlined: smaller, and every provider takes it."""
    if isinstance(node, list):
        return [_compact(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _compact(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    options = node.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options and node.get("default", None) is None:
        (kept,) = [option for option in options if option != {"type": "null"}]
        node = {**{k: v for k, v in node.items() if k != "anyOf"}, **kept}
        if "$ref" in node:
            node = {**defs[node.pop("$ref").rsplit("/", 1)[-1]], **node}
    return {k: _compact(v, defs) for k, v in node.items() if not (k == "title" and isinstance(v, str)) and not (k == "default" and not v)}


def tool(
    *,
    kind: ToolKind,
    read_only: bool,
    title: Callable[[Any], str] | None = None,
    paths: Callable[[Any], list[str]] | None = None,
) -> Callable[[ToolFunc], Tool]:
    """Make a Tool of ``async def name(ctx, args: ArgsModel)``; its docstring is the description."""

    def wrap(func: ToolFunc) -> Tool:
        args_model = func.__annotations__.get("args")
        if isinstance(args_model, str):
            args_model = func.__globals__[args_model]
        if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
            raise TypeError(f"tool {func.__name__}: annotate its args parameter with a pydantic model")
        name = func.__name__
        return Tool(
            name=func.__name__,
            description=inspect.cleandoc(func.__doc__ or ""),
            args_model=args_model,
            func=func,
            kind=kind,
            read_only=read_only,
            title=title or (lambda _args: name),
            paths=paths or (lambda _args: []),
        )

    return wrap
