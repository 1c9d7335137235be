"""Ids given on the command line: the whole id, or a unique prefix of one.

Every command that takes an id (a session, an approval, a job, a memory change, a pairing code,
a paired user) resolves it here, so that a prefix works the same everywhere and a prefix that
names several things lists them, and one that names nothing says where to look.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["SHOWN", "IdError", "ambiguous", "find_session", "resolve", "unknown"]

# An ambiguous prefix lists at most this many candidates.
SHOWN = 20


class IdError(Exception):
    """An id that names no single thing; the message says which candidates there are, or where to list them.
    ``matches`` holds the (id, description) pairs an ambiguous prefix names; empty when it names none."""

    code = 1

    def __init__(self, message: str, matches: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.matches = matches or []


def unknown(ref: str, what: str, listing: str, why: str = "") -> IdError:
    """The error for ``ref`` naming no ``what``; ``listing`` is the command that lists them."""
    return IdError(f"No {what} {ref!r}{': ' + why if why else ''}. List them with: hermes-editor {listing}")


def ambiguous(ref: str, what: str, matches: list[tuple[str, str]], *, more: bool = False) -> IdError:
    """The error for a prefix that several ``what`` share; ``matches`` are (id, description) pairs."""
    lines = [f"{ref!r} matches more than one {what}; give more of the id:"]
    lines += [f"  {id_}  {label}".rstrip() for id_, label in matches[:SHOWN]]
    if more or len(matches) > SHOWN:
        lines.append("  ... and more")
    return IdError("\n".join(lines), matches)


def resolve(ref: str, candidates: Iterable[tuple[str, str]], *, what: str, listing: str, min_length: int = 1) -> str:
    """The id among ``candidates`` ((id, description) pairs) that is ``ref``, or the only one starting with it.

    Case does not matter. Raises IdError when none or several match, or when a prefix is shorter
    than ``min_length`` (an exact id is always taken).
    """
    ref = ref.strip()
    pairs = list(candidates)
    wanted = ref.lower()
    for id_, _ in pairs:
        if id_.lower() == wanted:
            return id_
    if not ref:
        raise unknown(ref, what, listing, "an id is needed")
    if len(ref) < min_length:
        raise unknown(ref, what, listing, f"give at least {min_length} characters of its id")
    matches = [(id_, label) for id_, label in pairs if id_.lower().startswith(wanted)]
    if not matches:
        raise unknown(ref, what, listing)
    if len(matches) > 1:
        raise ambiguous(ref, what, sorted(matches))
    return matches[0][0]


async def find_session(store: Any, ref: str) -> Any:
    """The stored session (a SessionRecord) that ``ref`` names: its id or a unique prefix. Raises IdError."""
    from core.store.session_admin import AmbiguousPrefixError
    from core.store.session_admin import find_session as lookup
    from hermes_cli.redact import redact

    try:
        record = await lookup(store, ref.strip())
    except AmbiguousPrefixError as exc:
        matches = [(m.id, redact(m.title or "(untitled)")) for m in exc.matches]
        raise ambiguous(ref, "session", matches[:SHOWN], more=len(matches) > SHOWN) from None
    if record is None:
        raise unknown(ref, "session", "sessions list")
    return record
