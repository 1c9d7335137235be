"""The scripted OpenAI-compatible server, shipped in the package for the demo; re-exported for tests."""

from __future__ import annotations

from hermes_cli.scripted_model import ScriptedOpenAIServer, Spec

__all__ = ["ModelListServer", "ScriptedOpenAIServer", "Spec"]


class ModelListServer(ScriptedOpenAIServer):
    """A local server's model listings: ``GET /v1/models`` with ``models`` (unless ``openai_list`` is
    False, as on an Ollama without its OpenAI-compatible listing) and Ollama's native ``GET /api/tags``."""

    def __init__(self, models: list[str], *, openai_list: bool = True) -> None:
        super().__init__([], model=models[0] if models else "scripted")
        self.models = models
        self.openai_list = openai_list

    def handle_get(self, path: str) -> object | None:
        if path in ("/v1/models", "/models"):
            if not self.openai_list:
                return None
            return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "local"} for name in self.models]}
        if path == "/api/tags":
            return {"models": [{"name": name, "model": name, "size": 1} for name in self.models]}
        return None
