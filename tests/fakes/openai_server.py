"""The scripted OpenAI-compatible server, shipped in the package for the demo; re-exported for tests."""

from hermes_cli.scripted_model import ScriptedOpenAIServer, Spec

__all__ = ["ScriptedOpenAIServer", "Spec"]
