"""Which host a session's files and commands live on: the ``[projects.NAME]`` table whose ``path``
holds the session's folder says (the deepest one when they nest); none means this machine.

Every surface opens its sessions' hosts here. A host module for ``host = "NAME"`` is
``core.host.NAME``, imported when first needed, whose host class is built as
``Class(name, project, secrets=secrets)`` (``DockerHost``, ``SshHost``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from core.config import Config, ConfigError, ProjectConfig, config_path
from core.host.local import Host, LocalHost

__all__ = ["host_for", "project_for"]

_CLASSES = {"docker": "DockerHost", "ssh": "SshHost"}


def project_for(config: Config | None, cwd: Path) -> tuple[str, ProjectConfig] | None:
    """The ``[projects.NAME]`` (name and table) whose folder is ``cwd`` or holds it, or None."""
    if config is None or not config.projects:
        return None
    folder = cwd.expanduser().resolve()
    best: tuple[str, ProjectConfig] | None = None
    for name, project in config.projects.items():
        root = project.folder
        if folder == root or folder.is_relative_to(root):
            if best is None or len(root.parts) > len(best[1].folder.parts):
                best = (name, project)
    return best


def host_for(config: Config | None, cwd: Path, *, secrets: list[str] | None = None) -> Host:
    """A new host for a session working in ``cwd``: the matching project's, else ``LocalHost``.

    Raises ``ConfigError`` naming the project's ``host`` key when that host cannot be had here.
    """
    secrets = (config.secrets if config is not None else []) if secrets is None else secrets
    found = project_for(config, cwd)
    if found is None or found[1].host == "local":
        return LocalHost(secrets)
    name, project = found
    module_name = f"core.host.{project.host}"
    try:
        module: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        key = f"projects.{name}.host"
        if exc.name == module_name:
            raise ConfigError(
                f'the {project.host} host is not available in this installation; use host = "local" for now.', path=config_path(), key=key
            ) from None
        raise ConfigError(
            f"the {project.host} host needs the Python package {exc.name!r}; reinstall hermes-editor (pip install -U hermes-editor).",
            path=config_path(),
            key=key,
        ) from None
    host: Host = getattr(module, _CLASSES[project.host])(name, project, secrets=secrets)
    return host
