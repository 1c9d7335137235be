"""Screening a fetched skill before anything of it is written.

Every file is read from the fetched tree and checked: its path (no '..', no absolute path, no
control characters), its kind (regular files; a symlink only when it stays inside the skill;
no devices, no executables), its size, and for text the same screening context files and
learned text get (:func:`core.learning.screening.review_learned`: hidden instructions,
invisible Unicode, prompt injection, fetch-and-run, sending data out, loosening approvals),
plus checks for scripts that fetch code and run it across several lines. The result is the
files' bytes, so what is written is exactly what was screened.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from core.learning.hub.state import HubError

__all__ = ["SkillFile", "SkillRefused", "read_skill", "tree_hash"]

MAX_FILES = 1000
_EXECUTABLE_MAGIC = (
    b"\x7fELF",
    b"MZ",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xcf\xfa\xed\xfe",
    b"\xce\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
)
_BAD_NAME = re.compile(r"[\x00-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
FETCH_RUN = "fetches code over the network and runs it"


@dataclass(frozen=True, slots=True)
class SkillFile:
    path: str  # relative, "/"-separated
    data: bytes
    executable: bool

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


class SkillRefused(HubError):
    """Screening refused a fetched skill; ``problems`` name each file and line and why."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.problems = problems
        shown = "\n  ".join(problems[:20]) + (f"\n  … and {len(problems) - 20} more" if len(problems) > 20 else "")
        super().__init__(f"refused {name!r}: nothing was written. Screening found:\n  {shown}")


def tree_hash(files: dict[str, str]) -> str:
    """One hash of a skill's files (path -> sha256 of content): what an install wrote or what is there now."""
    joined = "".join(f"{path}\0{digest}\n" for path, digest in sorted(files.items()))
    return "sha256:" + hashlib.sha256(joined.encode("utf-8", "surrogateescape")).hexdigest()


def read_skill(folder: Path, name: str, *, max_file_bytes: int, max_skill_bytes: int) -> list[SkillFile]:
    """Every file of the skill in ``folder``, screened; SkillRefused lists all that is wrong."""
    problems: list[str] = []
    files: list[SkillFile] = []
    total = 0
    root = folder.resolve()
    for current, dirs, names in os.walk(folder, followlinks=False):
        here = Path(current)
        for entry in sorted(dirs):
            rel = (here / entry).relative_to(folder).as_posix()
            if entry == ".git" and here == folder:
                dirs.remove(entry)
            elif (here / entry).is_symlink():
                problems.append(f"{rel}: a symlink to a folder (a skill holds plain files)")
                dirs.remove(entry)
            elif _BAD_NAME.search(entry):
                problems.append(f"{rel!r}: control or invisible characters in a folder name")
                dirs.remove(entry)
        for entry in sorted(names):
            path = here / entry
            rel = path.relative_to(folder).as_posix()
            if _BAD_NAME.search(rel):
                problems.append(f"{rel!r}: control or invisible characters in a file name")
                continue
            if len(files) >= MAX_FILES:
                problems.append(f"more than {MAX_FILES} files")
                break
            found = _read_one(path, rel, root, max_file_bytes, problems)
            if found is None:
                continue
            total += len(found.data)
            if total > max_skill_bytes:
                problems.append(f"the skill is larger than {max_skill_bytes} bytes ([skills] max_skill_bytes)")
                break
            problems.extend(_screen_file(found))
            files.append(found)
    if not any(f.path == "SKILL.md" for f in files) and not any(p.startswith("SKILL.md") for p in problems):
        problems.append("SKILL.md: missing")
    if problems:
        raise SkillRefused(name, problems)
    return files


def _read_one(path: Path, rel: str, root: Path, max_file_bytes: int, problems: list[str]) -> SkillFile | None:
    """The bytes of one file (a symlink only when its target is inside the skill), or None with a problem noted."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        target = path.resolve()
        if not target.is_relative_to(root):
            problems.append(f"{rel}: a symlink pointing outside the skill ({os.readlink(path)})")
            return None
        if not target.is_file():
            problems.append(f"{rel}: a symlink to something that is not a file")
            return None
        info = target.stat()
        path = target
    if not stat.S_ISREG(info.st_mode):
        problems.append(f"{rel}: not a regular file")
        return None
    if info.st_size > max_file_bytes:
        problems.append(f"{rel}: {info.st_size} bytes, over the limit of {max_file_bytes} ([skills] max_file_bytes)")
        return None
    with open(path, "rb") as handle:
        data = handle.read(max_file_bytes + 1)
    if len(data) > max_file_bytes:
        problems.append(f"{rel}: over the limit of {max_file_bytes} bytes ([skills] max_file_bytes)")
        return None
    return SkillFile(rel, data, bool(info.st_mode & 0o111))


def _screen_file(file: SkillFile) -> list[str]:
    """What is wrong with one file's content, each naming the file and line."""
    if file.data.startswith(_EXECUTABLE_MAGIC):
        return [f"{file.path}: a compiled program (skills carry text and data, not executables)"]
    try:
        text = file.data.decode("utf-8")
    except UnicodeDecodeError:
        return []  # data such as an image: nothing reads it as instructions
    from core.learning.screening import review_learned

    findings, flags = review_learned(text, file.path)
    out = [finding.describe() for finding in findings] + [flag.finding.describe() for flag in flags]
    flagged_lines = {f.line for f in findings} | {f.finding.line for f in flags}
    prose = file.path.lower().endswith((".md", ".markdown", ".txt", ".rst"))
    out += [f"{file.path}:{line}: {reason}" for line, reason in script_problems(text, across_lines=not prose) if line not in flagged_lines]
    return out


# --- scripts that fetch code and run it ----------------------------------------------------------
#
# review_learned reads one logical line at a time. Scripts spread the same thing over lines:
# a download kept in a variable or a file, run further down; code fetched with a library and
# handed to exec.

_FETCH_API = (
    r"(?:urlopen|urlretrieve|urllib\.request|requests\.(?:get|post|request|session)|httpx\.(?:get|post|stream|client|asyncclient)"
    r"|http\.client|urllib3|aiohttp|socket\.create_connection|\bfetch\s*\(|\bhttps?\.get\s*\(|lwp::|net::http|open-uri|invoke-webrequest|downloadstring)"
)
_DYNAMIC_RUN = (
    r"(?:(?<![\w.])exec\s*\(|(?<![\w.])eval\s*\(|(?<![\w.])compile\s*\(|marshal\.loads|pickle\.loads|runpy\.|new\s+function\s*\("
    r"|vm\.run\w*\s*\(|\binstance_eval\b|\bkernel\.eval\b|\biex\b|invoke-expression)"
)
_PATTERNS = (
    # python -c / node -e / perl -e / ruby -e one-liners that fetch and evaluate.
    rf"\b(?:python[0-9.]*|py|node|deno|bun|perl|ruby)\s+(?:-\S+\s+)*-[ce]\b[^\n]*{_FETCH_API}[^\n]*{_DYNAMIC_RUN}",
    rf"\b(?:python[0-9.]*|py|node|deno|bun|perl|ruby)\s+(?:-\S+\s+)*-[ce]\b[^\n]*{_DYNAMIC_RUN}[^\n]*{_FETCH_API}",
    # A download piped to an interpreter after a tee or a filter: curl … | tee x | sh.
    r"\b(?:curl|wget)\b[^\n]*\|[^\n]*\|\s*(?:sudo\s+)?(?:sh|bash|zsh|dash|python[0-9.]*|perl|ruby|node)\b(?!\S)",
)
_SHELL_CAPTURE = r"^\s*(?:export\s+|local\s+|readonly\s+)?([a-z_]\w*)=[\"']?(?:\$\(|`)\s*(?:curl|wget)\b"
_SHELL_REDIRECT = r"\b(?:curl|wget)\b[^\n|]*?(?:>{1,2}|\s-o\s*|\s--output(?:-document)?[=\s]|\s-O\s+)\s*[\"']?([^\s;&|\"')]+)"


@functools.cache
def _compiled() -> tuple[tuple[re.Pattern[str], ...], re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    return (
        tuple(re.compile(p, re.IGNORECASE) for p in _PATTERNS),
        re.compile(_FETCH_API, re.IGNORECASE),
        re.compile(_DYNAMIC_RUN, re.IGNORECASE),
        re.compile(_SHELL_CAPTURE, re.IGNORECASE),
        re.compile(_SHELL_REDIRECT),
    )


def script_problems(text: str, *, across_lines: bool = True) -> list[tuple[int, str]]:
    """(line, reason) for code fetched and run: on one line, or fetched on one line and run on a
    later one. ``across_lines`` False (prose) skips "a fetch library somewhere, exec later"."""
    lines = text.split("\n")
    one_line, fetch_api, dynamic, capture, redirect = _compiled()
    out: list[tuple[int, str]] = []
    first_fetch: int | None = None
    captured: dict[str, int] = {}
    downloaded: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if any(p.search(line) for p in one_line):
            out.append((number, f"{FETCH_RUN}: “{_excerpt(line)}”"))
            continue
        if across_lines and first_fetch is not None and dynamic.search(line):
            out.append((number, f"{FETCH_RUN} (fetched at line {first_fetch}, evaluated here): “{_excerpt(line)}”"))
            continue
        if (ran := _runs_fetched(line, captured, downloaded)) is not None:
            out.append((number, f"{FETCH_RUN} (downloaded at line {ran}, run here): “{_excerpt(line)}”"))
            continue
        if fetch_api.search(line) and first_fetch is None:
            first_fetch = number
        if match := capture.search(line):
            captured[match.group(1)] = number
        for match in redirect.finditer(line):
            name = match.group(1).rsplit("/", 1)[-1]
            if name and name not in ("-", "/dev/null", "null"):
                downloaded[name] = number
    return out


# Where a command begins: the line's start, after ; & | ( ` $( or a shell keyword ("jq . x" is not ". x").
_COMMAND_START = r"(?:^|[;&|(`]|\$\(|\b(?:then|do|else|exec|time|nohup)\s)\s*"


def _runs_fetched(line: str, captured: dict[str, int], downloaded: dict[str, int]) -> int | None:
    """The line a download was made on when ``line`` runs it (eval "$x", sh -c "$x", bash x.sh, ./x.sh, . x)."""
    for var, at in captured.items():
        if re.search(
            rf"\b(?:eval|exec|source|(?:sh|bash|zsh|dash|python[0-9.]*|perl|ruby|node)\s+-[ce])\s+[\"']?\$\{{?{re.escape(var)}\b", line
        ):
            return at
        if re.search(
            rf"(?:echo|printf)\s+[^\n|]*\$\{{?{re.escape(var)}\b[^\n]*\|\s*(?:sudo\s+)?(?:sh|bash|zsh|dash|python[0-9.]*|perl|ruby|node)\b",
            line,
        ):
            return at
    for name, at in downloaded.items():
        escaped = re.escape(name)
        runner = r"(?:sudo\s+)?(?:sh|bash|zsh|dash|python[0-9.]*|perl|ruby|node|source|\.|chmod\s+\S*x\S*)"
        if re.search(rf"{_COMMAND_START}{runner}\s+(?:-\S+\s+)*[\"']?(?:\S*/)?{escaped}(?![\w.-])", line.strip()) or re.search(
            rf"(?:^|[;&|(]\s*)(?:\./|/\S*/){escaped}(?![\w.-])", line.strip()
        ):
            return at
    return None


def _excerpt(line: str) -> str:
    shown = " ".join(line.split())
    return shown if len(shown) <= 100 else shown[:97] + "…"
