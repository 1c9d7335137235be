"""``hermes-editor import --from PATH``: bring SOUL.md, memories and skills from a Hermes Agent
(``~/.hermes``) or OpenClaw (``~/.openclaw``) home. Everything is validated (screening, no
secrets, budgets, skill format); nothing existing is overwritten; a report says what was taken
and what was skipped, and why."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.learning.memory import Kind

__all__ = ["import_home", "register", "run"]


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("import", help="import SOUL.md, memories and skills from Hermes Agent or OpenClaw")
    parser.add_argument("--from", dest="source", required=True, help="the other agent's home, e.g. ~/.hermes")
    parser.add_argument("--dry-run", action="store_true", help="report without writing anything")


def run(args: argparse.Namespace) -> int:
    source = Path(args.source).expanduser()
    if not source.is_dir():
        print(f"{source} is not a folder.")
        return 1
    taken, skipped = import_home(source, dry_run=args.dry_run)
    print(("Would take" if args.dry_run else "Taken") + f" ({len(taken)}):")
    for line in taken:
        print(f"  + {line}")
    print(f"Skipped ({len(skipped)}):")
    for line in skipped:
        print(f"  - {line}")
    return 0


def _first(paths: list[Path]) -> Path | None:
    return next((p for p in paths if p.is_file()), None)


def import_home(source: Path, *, dry_run: bool = False) -> tuple[list[str], list[str]]:
    """Import what can be taken from ``source``; returns (taken, skipped) report lines."""
    from core.config import home
    from core.learning.screening import looks_secret, screen

    taken: list[str] = []
    skipped: list[str] = []
    places = [source, source / "workspace", source / "memories", source / "memory"]

    soul = _first([p / "SOUL.md" for p in places])
    if soul is not None:
        text = soul.read_text(encoding="utf-8", errors="replace")
        findings = screen(text, str(soul)).findings
        if (home() / "SOUL.md").exists():
            skipped.append(f"{soul}: SOUL.md already exists here")
        elif findings or looks_secret(text):
            skipped.append(f"{soul}: refused by screening ({'; '.join(f.describe() for f in findings) or 'a credential'})")
        else:
            if not dry_run:
                home().mkdir(parents=True, exist_ok=True)
                (home() / "SOUL.md").write_text(text, encoding="utf-8")
            taken.append(f"SOUL.md from {soul}")

    kinds: tuple[tuple[Kind, str], ...] = (("memory", "MEMORY.md"), ("user", "USER.md"))
    for kind, name in kinds:
        found = _first([p / name for p in places])
        if found is not None:
            _import_memory(found, kind, taken, skipped, dry_run)

    roots = [p / "skills" for p in (source, source / "workspace") if (p / "skills").is_dir()]
    for root in roots:
        for skill_md in sorted(root.rglob("SKILL.md")):
            if len(skill_md.relative_to(root).parts) <= 4 and ".archive" not in skill_md.parts:
                _import_skill(skill_md, taken, skipped, dry_run)
    return taken, skipped


def _import_memory(path: Path, kind: Kind, taken: list[str], skipped: list[str], dry_run: bool) -> None:
    from core.learning import memory
    from core.learning.context import current_settings
    from core.learning.screening import screen

    text = path.read_text(encoding="utf-8", errors="replace")
    # Hermes Agent separates entries with "§" lines; OpenClaw writes Markdown lists.
    chunks = [c.strip() for c in re.split(r"^\s*§\s*$", text, flags=re.MULTILINE)] if "§" in text else memory.parse_entries(text)
    existing = (
        set(memory.parse_entries(memory.memory_path(kind).read_text(encoding="utf-8"))) if memory.memory_path(kind).is_file() else set()
    )
    for chunk in (c for c in chunks if c and not c.startswith("#")):
        label = f"{path.name}: {chunk[:50]!r}"
        if chunk in existing:
            skipped.append(f"{label}: already remembered")
            continue
        if findings := screen(chunk, str(path)).findings:
            skipped.append(f"{label}: refused by screening ({findings[0].reason})")
            continue
        if dry_run:
            taken.append(f"{label} -> {memory.FILES[kind]}")
            continue
        try:
            memory.change_memory("add", kind, text=chunk, who="import", settings=current_settings())
            taken.append(f"{label} -> {memory.FILES[kind]}")
        except memory.MemoryError as exc:
            skipped.append(f"{label}: {str(exc).split('.')[0]}")


def _import_skill(skill_md: Path, taken: list[str], skipped: list[str], dry_run: bool) -> None:
    from core.learning import skills
    from core.state_home import repair_modes

    text = skill_md.read_text(encoding="utf-8", errors="replace")
    meta, _ = skills.parse_front_matter(text)
    name = re.sub(r"[^a-z0-9-]+", "-", str(meta.get("name") or skill_md.parent.name).lower()).strip("-")[:64]
    if name != meta.get("name"):
        text = re.sub(r"^name:.*$", f"name: {name}", text, count=1, flags=re.MULTILINE) if meta else text
    target = skills.personal_dir() / name
    try:
        skills._validate(name, text)
    except skills.SkillError as exc:
        skipped.append(f"skill {skill_md.parent.name}: {exc}")
        return
    if target.exists():
        skipped.append(f"skill {name}: a personal skill of that name exists")
        return
    if not dry_run:
        shutil.copytree(skill_md.parent, target, ignore=shutil.ignore_patterns(".*", "__pycache__"))
        repair_modes(target)  # copytree keeps the source's modes; the state home is private
        (target / "SKILL.md").write_text(text, encoding="utf-8")
    taken.append(f"skill {name} from {skill_md.parent}")
