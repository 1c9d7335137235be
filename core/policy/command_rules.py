"""Grades a parsed command line for the approval policy: safe, normal, dangerous or hard.

- safe: only reads. No project code runs and no option executes code or writes (``ls``,
  ``cat``, read-only ``git``, ``grep``, ``sed -n``, ``ruff check``).
- normal: anything else that stays in the project, the project's own code included (``pytest``,
  ``make test``, ``npm test``, ``python -c``); it writes, builds or runs things.
- dangerous: destroys data, reaches past the project or runs what cannot be checked (recursive
  ``rm``, force push, ``curl | sh``, ``git -c core.fsmonitor=...``, ``sed e``, code fed to a
  shell from a pipe, variables such as ``LD_PRELOAD``, ``sudo``); always asks.
- hard: wrecks the machine (``rm -rf /`` or ``~``, fork bombs, ``mkfs``, raw writes to disks,
  shutdown); refused even if approved.

Besides the level: the files it writes and reads (globs expanded, ``curl -d @file`` included)
and whether it reaches the network. Wrappers are looked through (``sudo``, ``env``, ``timeout``,
``xargs``, ``busybox``, ``uv run`` ...), and so are the commands a command runs (``sh -c``,
``eval``, ``find -exec``, ``$(...)``, aliases, here-documents fed to a shell). This layer
explains; the OS sandbox enforces.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from core.paths import within
from core.policy import command_args as args_
from core.policy.command_args import DANGEROUS, HARD, NORMAL, SAFE, Effects
from core.policy.command_grades import Grades
from core.policy.command_runs import RunsText, Source
from core.policy.command_tables import (
    BWRAP_ARITY,
    ELSEWHERE,
    HARMLESS_GIT_VARIABLES,
    INLINE_CODE,
    INTERPRETERS,
    LOOKUP_VARIABLES,
    PYTHON_MODULES,
    RUNNERS,
    SHELLS,
    WRAPPER_OPTIONS,
    WRAPPER_POSITIONALS,
    names,
    variable_runs_code,
    words,
)
from core.policy.command_words import ParseError
from core.policy.commands import Script, SimpleCommand, parse

__all__ = ["Assessment", "Level", "assess", "rule_key"]

Level = Literal["safe", "normal", "dangerous", "hard"]
_NAMES: tuple[Level, ...] = ("safe", "normal", "dangerous", "hard")
_SUBCOMMAND_PROGRAMS = names(
    "git npm yarn pnpm bun cargo go docker kubectl uv poetry pip pip3 make gh dotnet mvn gradle gradlew bundle rails rake terraform "
    "helm brew apt apt-get systemctl npx deno mix ruff"
)
_BLOCK_DEVICE = re.compile(r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|md\d|dm-\d|mapper/|loop\d|sr\d)")
_HARMLESS_DEVICES = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero", "/dev/random", "/dev/urandom"}
_SYSTEM_DIRS = words(
    "/etc /usr /bin /sbin /lib /lib32 /lib64 /boot /sys /proc /dev /var /opt /root /srv /snap /System /Library /private/etc /private/var"
)
_TEMP_DIRS = ("/var/tmp", "/var/folders", "/private/var/folders", "/private/tmp")
# For lines that do not parse; parsed lines are checked structurally (a function that pipes or
# backgrounds itself).
_FORK_TEXT = re.compile(r"(\w+|:)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&")
_SETTERS = {"export", "declare", "typeset", "local", "readonly"}


@dataclass(frozen=True, slots=True)
class Assessment:
    """What a command line does, as far as approvals care."""

    level: Level
    reason: str
    writes: tuple[Path, ...] = ()  # files it writes (redirections, arguments of writing programs)
    reads: tuple[Path, ...] = ()  # existing files and directories it names (globs expanded)
    keys: tuple[str, ...] = ()  # "program [subcommand]" of each command that is not safe
    all_keys: tuple[str, ...] = ()  # the same for every command
    programs: tuple[str, ...] = ()
    network: bool = False  # some command in it reaches the network, as far as can be told


def assess(command: str, cwd: Path, roots: list[Path] | None = None, home: Path | None = None) -> Assessment:
    """Grade ``command`` run in ``cwd``; paths inside ``roots`` are never "system" paths."""
    judge = _Judge(roots or [cwd], home or Path.home())
    try:
        script = parse(command)
    except ParseError as exc:
        judge.flag(NORMAL, f"it could not be parsed ({exc})")
        if _FORK_TEXT.search(command):
            judge.flag(HARD, "a fork bomb")
        return judge.result()
    judge.script(script, cwd, privileged=False)
    return judge.result()


def rule_key(argv: list[str]) -> str:
    """What "always allow" remembers for one command: the program, with its subcommand if it has them."""
    if not argv:
        return ""
    prog, rest = os.path.basename(argv[0]), argv[1:]
    if prog == "git":
        rest = _skip_git_globals(rest)
    plain = [a for a in rest if not a.startswith("-")]
    if prog in ("python", "python3") and "-m" in rest and rest.index("-m") + 1 < len(rest):
        return f"{prog} -m {rest[rest.index('-m') + 1]}"
    if prog in _SUBCOMMAND_PROGRAMS and plain:
        if prog in ("npm", "yarn", "pnpm", "bun") and plain[0] == "run" and len(plain) > 1:
            return f"{prog} run {plain[1]}"
        return f"{prog} {plain[0]}"
    if prog in INTERPRETERS and plain and not set("$`(<") & set(plain[0]):
        return f"{prog} {plain[0]}"
    return prog


def _skip_git_globals(args: list[str]) -> list[str]:
    return args_.git_globals(args)[3]


def _skip_options(args: list[str], with_values: set[str], positionals: int = 0) -> tuple[list[str], list[str]]:
    """A wrapper's command (after its options and ``NAME=VALUE`` words), and those assignments."""
    i, assignments = 0, []
    while i < len(args):
        word = args[i]
        if word == "--":
            i += 1
            break
        if word.startswith("-") and len(word) > 1:
            i += 2 if word in with_values else 1
            continue
        if "=" in word and word.split("=", 1)[0].isidentifier():  # env NAME=VALUE
            assignments.append(word)
            i += 1
            continue
        break
    return args[i + positionals :], assignments


@dataclass(slots=True)
class _Judge(Grades, RunsText):
    roots: list[Path]
    home: Path
    level: int = SAFE
    reason: str = "it only reads"
    writes: list[Path] = field(default_factory=list)
    reads: list[Path] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    all_keys: list[str] = field(default_factory=list)
    programs: list[str] = field(default_factory=list)
    network: bool = False
    aliases: dict[str, str] = field(default_factory=dict)
    expanding: set[str] = field(default_factory=set)
    current: int = SAFE  # the highest level flagged for the command being judged

    def flag(self, level: int, reason: str) -> None:
        self.current = max(self.current, level)
        if level > self.level:
            self.level, self.reason = level, reason

    def result(self) -> Assessment:
        reads = tuple(dict.fromkeys(self.reads))[:1000]
        return Assessment(
            _NAMES[self.level],
            self.reason,
            tuple(dict.fromkeys(self.writes)),
            reads,
            tuple(dict.fromkeys(self.keys)),
            tuple(dict.fromkeys(self.all_keys)),
            tuple(dict.fromkeys(self.programs)),
            self.network,
        )

    def apply(self, effects: Effects, cwd: Path, *, sends: bool = False) -> None:
        """Take in what an inspector found; ``sends``: its reads leave the machine, so they count
        even before the file exists (it may be made earlier in the line)."""
        self.flag(effects.level, effects.reason)
        for word in effects.writes:
            self._write(word, cwd)
        for word in effects.reads:
            self._read(word, cwd, exists=not sends)
        self.network |= effects.network

    # --- walking -----------------------------------------------------------------------

    def script(self, script: Script, cwd: Path, *, privileged: bool) -> None:
        for command in script.commands:
            if command.function and command.words and os.path.basename(command.words[0]) == command.function:
                if command.background or len(script.pipeline_of(command)) > 1:
                    self.flag(HARD, f"a fork bomb (function {command.function} starts copies of itself)")
        for command in script.commands:
            for nested in command.nested:
                self.script(nested, cwd, privileged=privileged)
            if not command.words:
                self._assignments(command.assignments, cwd)
            self._redirects(command, cwd)
            if command.words:
                if command.words[0] == "alias":
                    for word in command.words[1:]:
                        name, eq, body = word.partition("=")
                        if eq:
                            self.aliases[name] = body
                self.run(list(command.words), command, script, cwd, privileged)
                if command.words[0] in ("cd", "pushd"):
                    target = command.words[1] if len(command.words) > 1 else "~"
                    cwd = self._path(target, cwd) or cwd

    def nested_text(self, text: str, cwd: Path, privileged: bool) -> None:
        try:
            self.script(parse(text, 1), cwd, privileged=privileged)
        except ParseError as exc:
            self.flag(NORMAL, f"it runs a command that could not be parsed ({exc})")
            if _FORK_TEXT.search(text):
                self.flag(HARD, "a fork bomb")

    def run(
        self,
        argv: list[str],
        command: SimpleCommand,
        script: Script,
        cwd: Path,
        privileged: bool,
        source: Source = None,
    ) -> None:
        """Judge one program run, looking through wrappers and into the commands it runs.

        ``source`` says where its arguments come from: ("input", replace-string) under xargs,
        ("placeholder", "{}") under find -exec and fd -x.
        """
        outer, self.current = self.current, SAFE
        try:
            self._run(argv, command, script, cwd, privileged, source)
        finally:
            self.current = max(outer, self.current)

    def _run(self, argv: list[str], command: SimpleCommand, script: Script, cwd: Path, privileged: bool, source: Source) -> None:
        self._assignments(command.assignments, cwd)
        while argv:
            if argv[0] in self.aliases and argv[0] not in self.expanding:
                name = argv[0]
                self.expanding.add(name)
                self.nested_text(" ".join([self.aliases[name], *map(shlex.quote, argv[1:])]), cwd, privileged)
                self.expanding.discard(name)
                return
            prog = os.path.basename(argv[0])
            if prog in ("sudo", "doas", "pkexec", "su", "runuser"):
                privileged = True
                if prog == "su":
                    if "-c" in argv[:-1]:
                        return self.nested_text(argv[argv.index("-c") + 1], cwd, True)
                    return self.flag(DANGEROUS, "it opens a root shell (su)")
                if any(a in ("-s", "-i", "--shell", "--login") for a in argv[1:2]):
                    return self.flag(DANGEROUS, f"it opens a root shell ({prog})")
                argv, assignments = _skip_options(argv[1:], WRAPPER_OPTIONS.get(prog, set()))
                self._assignments(assignments, cwd)
                if not argv:
                    return self.flag(DANGEROUS, f"it runs as root ({prog})")
            elif prog == "command" and argv[1:2] in (["-v"], ["-V"]):
                break
            elif prog == "env" and any(a in ("-S", "--split-string") or a.startswith("--split-string=") for a in argv):
                flag = next(i for i, a in enumerate(argv) if a in ("-S", "--split-string") or a.startswith("--split-string="))
                text = " ".join(argv[flag + 1 :]) if "=" not in argv[flag] else " ".join([argv[flag].partition("=")[2], *argv[flag + 1 :]])
                return self.nested_text(text, cwd, privileged) if text else None
            elif prog in ("busybox", "toybox"):
                if len(argv) > 1 and not argv[1].startswith("-"):
                    argv = argv[1:]
                    continue
                break
            elif prog == "bwrap":
                i = 1
                while i < len(argv) and argv[i].startswith("--"):
                    i += 1 + BWRAP_ARITY.get(argv[i], 0) if argv[i] != "--" else 1
                    if argv[i - 1] == "--":
                        break
                argv = argv[i:]
            elif prog == "script" and (
                at := next((i for i, a in enumerate(argv[1:-1], 1) if a == "--command" or a[:1] == "-" and a[1:2] != "-" and "c" in a), 0)
            ):
                return self.nested_text(argv[at + 1], cwd, privileged)
            elif prog in WRAPPER_OPTIONS or prog in WRAPPER_POSITIONALS:
                if prog in ELSEWHERE:
                    self.flag(DANGEROUS, f"it runs a command outside this session's confinement ({prog})")
                if prog in ("torsocks", "proxychains", "proxychains4", "npx", "bunx", "pnpx", "uvx"):
                    self.network = True  # a proxy, or a package fetched to run
                if prog in ("strace", "ltrace"):
                    for option, value in args_.scan(argv[1:], WRAPPER_OPTIONS[prog], permute=False):
                        if option in ("-o", "--output") and value:
                            self._write(value, cwd)
                if prog == "xargs":
                    source = ("input", self._xargs_replace(argv[1:]))
                rest, assignments = _skip_options(argv[1:], WRAPPER_OPTIONS.get(prog, set()), WRAPPER_POSITIONALS.get(prog, 0))
                self._assignments(assignments, cwd)
                if prog == "watch":
                    return self.nested_text(" ".join(rest), cwd, privileged) if rest else None
                if not rest:
                    break  # `env` alone prints, `xargs` alone echoes
                argv = rest
            elif (prog, argv[1] if len(argv) > 1 else "") in RUNNERS:
                argv = _skip_options(argv[2:], set())[0]
            else:
                break
        if not argv:
            return
        if "$" in argv[0] or "`" in argv[0]:
            return self.flag(DANGEROUS, "it runs a program named by a variable or a substitution, which cannot be checked")
        key = rule_key(argv)
        argv = [_canonical(os.path.basename(argv[0])), *argv[1:]]
        prog = argv[0]
        if prog in ("python", "python3", "python2") and len(argv) > 2 and argv[1] == "-m" and argv[2] in PYTHON_MODULES:
            argv = [argv[2], *argv[3:]]  # python -m pip install: judged as pip install
            prog = argv[0]
        self.programs.append(prog)
        if prog in _SETTERS:
            self._assignments([a for a in argv[1:] if "=" in a and not a.startswith("-")], cwd)
        if prog == "trap" and len(argv) > 2 and not argv[1].startswith("-"):
            self.nested_text(argv[1], cwd, privileged)
        if prog in INTERPRETERS:
            self._interpreter_input(argv, command, script)
        if source and source[0] == "input" and prog in SHELLS:
            self.flag(DANGEROUS, f"it runs commands built from its input ({prog})")
        if prog in SHELLS | {"eval"} and self._shell(argv, command, script, cwd, privileged, source):
            return
        if prog in ("source", "."):
            self._source(argv, command, script)
        if prog in INLINE_CODE:
            if self._inline(argv, command, script, cwd, source):
                self.network = True
        if prog == "find":
            self._exec_args(argv, ("-exec", "-execdir", "-ok", "-okdir"), (";", "+"), command, script, cwd, privileged)
        if prog in ("fd", "fdfind"):
            self._exec_args(argv, ("-x", "--exec", "-X", "--exec-batch"), (";",), command, script, cwd, privileged)
        level, reason = self._grade(argv, command, script, cwd)
        if privileged and level < DANGEROUS:
            level, reason = DANGEROUS, f"it runs as root ({prog} through sudo)"
        self.flag(level, reason)
        self.all_keys.append(key)
        if self.current > SAFE:
            self.keys.append(key)
        if self._network(prog, argv, level, cwd):
            self.network = True
        for word in argv[1:]:
            if word.startswith("--") and "=" in word:
                self._read(word.partition("=")[2], cwd)
            elif not word.startswith("-"):
                self._read(word, cwd)

    def _xargs_replace(self, args: list[str]) -> str | None:
        for option, value in args_.scan(args, {"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a"}, {"-i", "--replace"}, permute=False):
            if option == "-I":
                return value
            if option in ("-i", "--replace"):
                return value or "{}"
            if option is None:
                break
        return None

    def _assignments(self, words: list[str], cwd: Path) -> None:
        """``NAME=VALUE`` before a command, through ``env``/``sudo``, or with ``export``."""
        for word in words:
            name, _, value = word.partition("=")
            name = name.split("[")[0].rstrip("+")
            if variable_runs_code(name, value):
                self.flag(DANGEROUS, f"it sets {name}, which makes programs run other code")
            elif name.startswith("GIT_TRACE") or name == "GIT_REDACT_COOKIES":
                if value.startswith(("/", "~", ".")):
                    self._write(value, cwd)
            elif name in LOOKUP_VARIABLES:
                self.flag(NORMAL, f"it sets {name}, so the programs it runs may be the project's own")
            elif name.startswith("GIT_") and name not in HARMLESS_GIT_VARIABLES:
                self.flag(NORMAL, f"it sets {name}, which changes what git does")

    def _exec_args(
        self,
        argv: list[str],
        starts: tuple[str, ...],
        ends: tuple[str, ...],
        command: SimpleCommand,
        script: Script,
        cwd: Path,
        privileged: bool,
    ) -> None:
        """The commands ``find -exec`` and ``fd -x`` run, with the found names put in for ``{}``."""
        i = 1
        while i < len(argv):
            if argv[i] in starts:
                end = next((j for j in range(i + 1, len(argv)) if argv[j] in ends), len(argv))
                self.run(argv[i + 1 : end], command, script, cwd, privileged, ("placeholder", "{}"))
                i = end
            i += 1

    def _redirects(self, command: SimpleCommand, cwd: Path) -> None:
        for redirect in command.redirects:
            if redirect.target.startswith(("/dev/tcp/", "/dev/udp/")):
                self.network = True
                self.flag(DANGEROUS, f"it opens a raw network connection ({redirect.target})")
            elif redirect.op in (">", ">>", ">|", "&>", "&>>", "<>") or (redirect.op == ">&" and not redirect.target.isdigit()):
                if redirect.target != "-":
                    self._write(redirect.target, cwd)
            elif redirect.op == "<":
                self._read(redirect.target, cwd)

    # --- paths -------------------------------------------------------------------------

    def _inside(self, path: Path) -> bool:
        return within(path, self.roots)

    def _read(self, word: str, cwd: Path, *, exists: bool = True) -> None:
        """An existing file or directory a word names, globs expanded as the shell would."""
        pattern = getattr(word, "glob", None)
        if pattern:
            matches, truncated = args_.expand_glob(pattern, cwd, self.home)
            self.reads += matches
            if not truncated:
                return
            word = args_.static_prefix(args_.home_pattern(pattern, self.home))  # the directory, then
        path = self._path(word, cwd)
        if path is None and ("$" in word or "`" in word) and (word := args_.home_pattern(word, self.home)).startswith("/"):
            path = self._path(args_.static_prefix(word), cwd)  # /proc/$PPID/environ reads in /proc
        if path is not None and (not exists or os.path.lexists(path)):
            self.reads.append(path)

    def _write(self, word: str, cwd: Path) -> None:
        pattern = getattr(word, "glob", None)
        if pattern and (matches := args_.expand_glob(pattern, cwd, self.home)[0]):
            for match in matches:
                self._write_path(match)
            return
        if _BLOCK_DEVICE.match(word):
            return self.flag(HARD, f"it writes raw data to the disk device {word}")
        path = self._path(word, cwd)
        if path is not None:
            self._write_path(path)

    def _write_path(self, path: Path) -> None:
        text = str(path)
        if _BLOCK_DEVICE.match(text):
            return self.flag(HARD, f"it writes raw data to the disk device {text}")
        if text in _HARMLESS_DEVICES or text.startswith("/dev/fd/"):
            return
        if not self._inside(path) and text.startswith(_SYSTEM_DIRS) and not text.startswith(_TEMP_DIRS):
            self.flag(DANGEROUS, f"it writes to a system path ({text})")
        self.flag(NORMAL, f"it writes {text}")
        self.writes.append(path)

    def _path(self, word: str, cwd: Path) -> Path | None:
        """The path a word names, resolved; None when it depends on a variable or a substitution."""
        for var in ("$HOME", "${HOME}"):
            if word == var or word.startswith(var + "/"):
                word = str(self.home) + word[len(var) :]
        if word == "~" or word.startswith("~/"):
            word = str(self.home) + word[1:]
        if not word or "$" in word or "`" in word or word.startswith(("~", "<(", ">(")):
            return None
        return Path(os.path.realpath(cwd / word))

    def _is_root_target(self, word: str, cwd: Path) -> bool:
        """/, a home directory, or a top-level system directory (or everything in one)."""
        if word.endswith("*"):
            word = word[:-1] or "."
        path = self._path(word.rstrip("/") or "/", cwd)
        if path is None:
            return False
        home = Path(os.path.realpath(self.home))
        return (
            path == home
            or path in home.parents
            or str(path) in _SYSTEM_DIRS
            or str(path) in ("/home", "/Users")
            or path.parent in (Path("/home"), Path("/Users"))
        )

    def _read_program(self, word: str, cwd: Path) -> str | None:
        return args_.read_small(self._path(word, cwd))


def _canonical(prog: str) -> str:
    """``python3.12`` is python, ``pip3.11`` is pip, ``bash5`` is bash."""
    if prog in INLINE_CODE or prog in SHELLS:
        return prog
    base = re.sub(r"[\d.]+$", "", prog)
    return base if base != prog and (base in INLINE_CODE or base in SHELLS or base in ("pip", "python")) else prog
