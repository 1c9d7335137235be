"""What every exported string passes through: secrets out always, and with ``--anonymise`` the
user's home, name, project path and e-mail addresses replaced the same way throughout an export.

An export leaves the machine (a training set, a bug report), so it is scrubbed harder than the
store: the configured secret values (:func:`core.redaction.scrub`), credential shapes
(:func:`core.learning.screening.redact_secrets`), and the secret-looking values a tool's
arguments or JSON output carry (``"api_key": "..."``, ``Authorization: Bearer ...``, an argument
named ``token``).
"""

from __future__ import annotations

import functools
import getpass
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.learning.screening import redact_secrets
from core.redaction import REDACTED, scrub

__all__ = ["Anonymiser", "Cleaner", "secret_free"]

# Names of arguments and JSON fields whose value is a credential whatever it looks like.
_SECRET_NAME = re.compile(r"(?i)(pass(word|wd|phrase)?|secret|token|api[_-]?key|auth(orization)?|credentials?|private[_-]?key|cookie)$")
# "api_key": "value" in JSON text (redact_secrets knows api_key=value and api_key: value only).
_JSON_SECRET = re.compile(
    r'(?i)("[A-Za-z0-9_.-]*(?:password|passwd|secret|token|api[_-]?key|authorization|credential)s?"\s*:\s*")((?:[^"\\]|\\.){8,})(")'
)
_AUTH_HEADER = re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{16,}")
_EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
# What continues a path: a match followed by it is another path ("/a/app" in "/a/app2", "/a/app.py");
# a full stop that ends a sentence does not.
_PATH_GOES_ON = r"(?![\w-]|\.[\w.-])"


def secret_free(text: str) -> str:
    """``text`` without configured secret values, credential shapes, or secret-looking JSON fields
    and authorization headers."""
    text = redact_secrets(scrub(text))
    text = _JSON_SECRET.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
    return _AUTH_HEADER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


@dataclass(slots=True)
class Anonymiser:
    """Replaces, in this order: e-mail addresses by ``user1@example.com``, ``user2@...`` (numbered
    by first appearance, the same address the same number across the whole export); the session's
    project root by ``<project>``; the home directory by ``~`` (so other paths under it read
    ``~/...``); the user's login name and full name, as whole words in any case, by ``<user>``."""

    home: tuple[str, ...]
    names: tuple[str, ...]
    emails: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_this_user(cls) -> Anonymiser:
        """The home directory (as given and resolved) and the login and full names of whoever runs this."""
        homes = {str(Path.home())}
        try:
            homes.add(str(Path.home().resolve()))
        except OSError:
            pass
        user = getpass.getuser()
        names = {user, *_full_names(user)}
        return cls(
            home=tuple(sorted((h.rstrip("/") for h in homes if h.rstrip("/")), key=len, reverse=True)),
            names=tuple(sorted((n for n in names if len(n) >= 2), key=len, reverse=True)),
        )

    def text(self, text: str, project: str | None) -> str:
        """``text`` with the replacements above; ``project`` is the session's working directory."""
        if not text:
            return text
        # Each pattern runs only where its text occurs: most strings hold none of them.
        if "@" in text:
            text = _EMAIL.sub(self._email, text)
        for root in _roots(project):
            if root in text:
                text = _path_pattern(root).sub("<project>", text)
        for home in self.home:
            if home in text:
                text = _path_pattern(home).sub("~", text)
        folded = text.casefold()
        for name in self.names:
            if name.casefold() in folded:
                text = _word_pattern(name).sub("<user>", text)
        return text

    def _email(self, match: re.Match[str]) -> str:
        address = match.group(0).lower()
        if address not in self.emails:
            self.emails[address] = f"user{len(self.emails) + 1}@example.com"
        return self.emails[address]


class Cleaner:
    """Applies :func:`secret_free` (or the ``secrets`` function given) and, when set, an
    :class:`Anonymiser` to every string of an exported value, keys included."""

    def __init__(self, secrets: Callable[[str], str] = secret_free, anonymiser: Anonymiser | None = None) -> None:
        self.secrets = secrets
        self.anonymiser = anonymiser

    def text(self, text: str, project: str | None) -> str:
        """One string, cleaned."""
        text = self.secrets(text)
        if self.anonymiser is not None:
            text = self.anonymiser.text(text, project)
        return text

    def value(self, value: Any, project: str | None) -> Any:
        """A JSON value with every string cleaned; a string under a credential's name is redacted whole."""
        if isinstance(value, str):
            return self.text(value, project)
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                name = self.text(str(key), project)
                secret = isinstance(item, str) and item and _SECRET_NAME.search(str(key))
                out[name] = REDACTED if secret else self.value(item, project)
            return out
        if isinstance(value, (list, tuple)):
            return [self.value(item, project) for item in value]
        return value


def _full_names(user: str) -> list[str]:
    """The full name in the password database's GECOS field, when it belongs to ``user``."""
    try:
        import pwd

        entry = pwd.getpwuid(os.getuid())
    except (ImportError, KeyError, OSError):
        return []
    if entry.pw_name != user:
        return []
    full = entry.pw_gecos.split(",", 1)[0].strip()
    return [full] if full and full != user else []


@functools.lru_cache(maxsize=64)
def _roots(project: str | None) -> tuple[str, ...]:
    if not project or project.rstrip("/") == "":
        return ()
    found = {project.rstrip("/")}
    try:
        found.add(str(Path(project).resolve()).rstrip("/"))
    except OSError:
        pass
    return tuple(sorted(found, key=len, reverse=True))


@functools.lru_cache(maxsize=256)
def _path_pattern(path: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.~-])" + re.escape(path) + _PATH_GOES_ON)


@functools.lru_cache(maxsize=64)
def _word_pattern(word: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(word) + r"(?![A-Za-z0-9])", re.IGNORECASE)
