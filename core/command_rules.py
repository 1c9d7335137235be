"""Grades a parsed command line for the approval policy: safe, normal, dangerous or hard.

- safe: only reads (``ls``, ``cat``, read-only ``git``, ``grep``) or runs the project's tests
  and checkers; may run unasked in ``accept-edits``.
- normal: anything else that stays in the project; asks unless the mode is ``auto``.
- dangerous: destroys data or reaches past the project (recursive ``rm``, force push, hard
  reset, ``chmod -R``, ``curl | sh``, ``dd``, system paths, SQL DROP/TRUNCATE, killing
  processes, ``sudo``); always asks, and "always allow" is never offered.
- hard: wrecks the machine (``rm -rf /`` or ``~``, fork bombs, ``mkfs``, raw writes to disks,
  shutdown); refused even if approved.

Wrappers are looked through (``sudo``, ``env``, ``timeout``, ``xargs``, ``uv run`` ...), and
so are the commands a command runs (``sh -c``, ``eval``, ``find -exec``, ``$(...)``,
here-documents fed to a shell).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from core.commands import ParseError, Script, SimpleCommand, parse

__all__ = ["Assessment", "Level", "assess", "rule_key"]

Level = Literal["safe", "normal", "dangerous", "hard"]
SAFE, NORMAL, DANGEROUS, HARD = 0, 1, 2, 3
_NAMES: tuple[Level, ...] = ("safe", "normal", "dangerous", "hard")

SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"}
INTERPRETERS = SHELLS | {"python", "python2", "python3", "perl", "ruby", "node", "php", "lua", "pwsh", "source", ".", "eval"}
DOWNLOADERS = {"curl", "wget", "fetch", "aria2c", "http", "https", "xh"}
SAFE_PROGRAMS = {
    "ls", "dir", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "ag", "ack", "pwd", "echo", "printf",
    "which", "whereis", "type", "whoami", "id", "date", "uname", "hostname", "printenv", "file", "stat", "du", "df",
    "tree", "diff", "cmp", "uniq", "cut", "tr", "basename", "dirname", "realpath", "readlink", "jq", "true", "false",
    "test", "[", "seq", "md5sum", "sha1sum", "sha256sum", "shasum", "cksum", "xxd", "hexdump", "od", "strings", "nl",
    "column", "comm", "join", "paste", "fold", "tac", "rev", "sleep", "cd", "pushd", "popd", "export", "set", "unset",
    "alias", ":", "less", "more", "ps", "free", "uptime", "nproc", "arch", "groups", "exit", "local", "declare",
    "read", "wait", "jobs", "command", "env", "ruff", "mypy", "pyright", "flake8", "pylint", "pyflakes",
    "pycodestyle", "pytest", "py.test", "jest", "vitest", "mocha", "ava", "rspec", "phpunit", "ctest", "tsc",
    "eslint", "black", "isort", "prettier", "lint-imports", "sort", "sed", "find", "fd", "git", "cargo", "go",
    "npm", "yarn", "pnpm", "bun", "make", "python", "python3", "node", "dotnet", "mvn", "gradle", "gradlew",
    "mix", "deno",
}
# Programs named above whose arguments decide: the first word after them that makes them safe.
_SAFE_SUBCOMMANDS = {
    "cargo": {"test", "check", "clippy", "tree", "metadata", "--version"},
    "go": {"test", "vet", "list", "version", "env"},
    "npm": {"test", "t", "ls", "list", "outdated", "view", "--version"},
    "yarn": {"test", "list", "--version"},
    "pnpm": {"test", "list", "ls", "--version"},
    "bun": {"test", "--version"},
    "make": {"test", "check", "-n"},
    "dotnet": {"test"},
    "mvn": {"test", "verify"},
    "gradle": {"test", "check"},
    "gradlew": {"test", "check"},
    "mix": {"test"},
    "deno": {"test", "check", "lint"},
    "ruff": {"check", "--version"},
}
_FIX_FLAGS = {"--fix", "--fix-only", "--unsafe-fixes", "--write", "-w"}
_GIT_READ = {
    "status", "diff", "log", "show", "blame", "shortlog", "describe", "rev-parse", "ls-files", "ls-tree", "ls-remote",
    "cat-file", "show-ref", "merge-base", "for-each-ref", "rev-list", "name-rev", "whatchanged", "diff-tree",
    "diff-index", "diff-files", "count-objects", "version", "help", "check-ignore", "grep", "--version",
}
_SUBCOMMAND_PROGRAMS = {
    "git", "npm", "yarn", "pnpm", "bun", "cargo", "go", "docker", "kubectl", "uv", "poetry", "pip", "pip3", "make",
    "gh", "dotnet", "mvn", "gradle", "gradlew", "bundle", "rails", "rake", "terraform", "helm", "brew", "apt",
    "apt-get", "systemctl", "npx", "deno", "mix", "ruff",
}
_WRITERS = {"cp", "mv", "install", "rsync", "ln", "touch", "mkdir", "rm", "rmdir", "unlink", "truncate", "tee", "shred"}
_MODE_WRITERS = {"chmod", "chown", "chgrp"}
_HARD_PROGRAMS = {"mke2fs", "mkswap", "fdisk", "sfdisk", "cfdisk", "parted", "gdisk", "sgdisk", "wipefs", "shutdown", "reboot", "halt", "poweroff"}
_KILLERS = {"kill", "killall", "pkill", "skill", "xkill", "taskkill"}
_DB_CLIENTS = {"psql", "mysql", "mariadb", "sqlite3", "sqlcmd", "duckdb", "clickhouse", "clickhouse-client", "cockroach", "mongosh", "mongo", "redis-cli", "pgcli", "mycli", "litecli"}
_SQL_DANGER = re.compile(r"\b(drop\s+(table|database|schema|index|view|user|role|collection)|truncate(\s+table)?\s+\w|flushall|flushdb|dropdatabase\s*\()", re.I)
_PUBLISH = {("npm", "publish"), ("yarn", "publish"), ("pnpm", "publish"), ("cargo", "publish"), ("twine", "upload"), ("gem", "push"), ("poetry", "publish"), ("uv", "publish"), ("docker", "push")}
_DESTROY = {("terraform", "destroy"), ("kubectl", "delete"), ("helm", "uninstall"), ("helm", "delete"), ("gcloud", "delete")}
_BLOCK_DEVICE = re.compile(r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|md\d|dm-\d|mapper/|loop\d|sr\d)")
_HARMLESS_DEVICES = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero", "/dev/random", "/dev/urandom"}
_SYSTEM_DIRS = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/sys", "/proc", "/dev", "/var", "/opt", "/root", "/srv", "/snap", "/System", "/Library", "/private/etc", "/private/var")
_TEMP_DIRS = ("/var/tmp", "/var/folders", "/private/var/folders", "/private/tmp")
# For lines that do not parse; parsed lines are checked structurally (a function that pipes or
# backgrounds itself).
_FORK_TEXT = re.compile(r"(\w+|:)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&")
_FORK_CODE = re.compile(r"fork\s+while\s+fork|while\s*\(?\s*(true|1)\s*\)?\s*:?\s*os\.fork\(\)", re.I)
_OPTIONS_WITH_VALUES = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group", "--chdir", "--prompt", "--host"},
    "doas": {"-u", "-C"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-t", "--class", "--classdata"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "gtimeout": {"-s", "--signal", "-k", "--kill-after"},
    "stdbuf": {"-i", "-o", "-e"},
    "flock": {"-w", "-E", "--timeout", "--conflict-exit-code"},
    "time": {"-f", "-o", "--format", "--output"},
    "exec": {"-a"},
    "xargs": {"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "--max-args", "--max-procs", "--delimiter", "--arg-file", "--replace", "--max-lines"},
    "env": {"-u", "--unset", "-C", "--chdir"},
    "npx": {"-p", "--package"},
    "watch": {"-n", "--interval", "-q", "--equexit"},
    "nohup": set(), "setsid": set(), "builtin": set(), "command": set(), "unbuffer": set(), "caffeinate": set(), "bunx": set(), "pnpx": set(),
}
_POSITIONALS = {"timeout": 1, "gtimeout": 1, "flock": 1, "chrt": 1, "taskset": 1}
_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"), ("hatch", "run"), ("rye", "run"), ("bundle", "exec"), ("pnpm", "exec"), ("npm", "exec"), ("yarn", "exec")}


@dataclass(frozen=True, slots=True)
class Assessment:
    """What a command line does, as far as approvals care."""

    level: Level
    reason: str
    writes: tuple[Path, ...] = ()  # files it writes (redirections, arguments of writing programs)
    reads: tuple[Path, ...] = ()  # existing files named as arguments
    keys: tuple[str, ...] = ()  # "program [subcommand]" of each command that is not safe
    all_keys: tuple[str, ...] = ()  # the same for every command
    programs: tuple[str, ...] = ()


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
    out, i = [], 0
    while i < len(args):
        if args[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace"):
            i += 2
            continue
        if args[i].startswith("-") and not out:
            i += 1
            continue
        out.append(args[i])
        i += 1
    return out


def _skip_options(args: list[str], with_values: set[str], positionals: int = 0) -> list[str]:
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            i += 1
            break
        if word.startswith("-") and len(word) > 1:
            i += 2 if word in with_values else 1
            continue
        if "=" in word and word.split("=", 1)[0].isidentifier():  # env NAME=VALUE
            i += 1
            continue
        break
    return args[i + positionals :]


@dataclass(slots=True)
class _Judge:
    roots: list[Path]
    home: Path
    level: int = SAFE
    reason: str = "it only reads"
    writes: list[Path] = field(default_factory=list)
    reads: list[Path] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    all_keys: list[str] = field(default_factory=list)
    programs: list[str] = field(default_factory=list)

    def flag(self, level: int, reason: str) -> None:
        if level > self.level:
            self.level, self.reason = level, reason

    def result(self) -> Assessment:
        return Assessment(_NAMES[self.level], self.reason, tuple(self.writes), tuple(self.reads[:50]), tuple(dict.fromkeys(self.keys)), tuple(dict.fromkeys(self.all_keys)), tuple(dict.fromkeys(self.programs)))

    # --- walking -----------------------------------------------------------------------

    def script(self, script: Script, cwd: Path, *, privileged: bool) -> None:
        for command in script.commands:
            if command.function and command.words and os.path.basename(command.words[0]) == command.function:
                if command.background or len(script.pipeline_of(command)) > 1:
                    self.flag(HARD, f"a fork bomb (function {command.function} starts copies of itself)")
        for command in script.commands:
            for nested in command.nested:
                self.script(nested, cwd, privileged=privileged)
            self._redirects(command, cwd)
            if command.words:
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

    def run(self, argv: list[str], command: SimpleCommand, script: Script, cwd: Path, privileged: bool) -> None:
        """Judge one program run, looking through wrappers and into the commands it runs."""
        while argv:
            prog = os.path.basename(argv[0])
            if prog in ("sudo", "doas", "pkexec", "su"):
                privileged = True
                if prog == "su":
                    if "-c" in argv[:-1]:
                        return self.nested_text(argv[argv.index("-c") + 1], cwd, True)
                    return self.flag(DANGEROUS, "it opens a root shell (su)")
                if any(a in ("-s", "-i", "--shell", "--login") for a in argv[1:2]):
                    return self.flag(DANGEROUS, f"it opens a root shell ({prog})")
                argv = _skip_options(argv[1:], _OPTIONS_WITH_VALUES.get(prog, set()))
                if not argv:
                    return self.flag(DANGEROUS, f"it runs as root ({prog})")
            elif prog == "command" and argv[1:2] in (["-v"], ["-V"]):
                break
            elif prog == "env" and any(a in ("-S", "--split-string") for a in argv):
                flag = next(a for a in argv if a in ("-S", "--split-string"))
                if argv.index(flag) + 1 < len(argv):
                    return self.nested_text(" ".join(argv[argv.index(flag) + 1 :]), cwd, privileged)
                break
            elif prog in _OPTIONS_WITH_VALUES or prog in _POSITIONALS:
                rest = _skip_options(argv[1:], _OPTIONS_WITH_VALUES.get(prog, set()), _POSITIONALS.get(prog, 0))
                if prog == "watch":
                    return self.nested_text(" ".join(rest), cwd, privileged) if rest else None
                if not rest:
                    break  # `env` alone prints, `xargs` alone echoes
                argv = rest
            elif (prog, argv[1] if len(argv) > 1 else "") in _RUNNERS:
                argv = _skip_options(argv[2:], set())
            else:
                break
        if not argv:
            return
        if "$" in argv[0] or "`" in argv[0]:
            return self.flag(DANGEROUS, "it runs a program named by a variable or a substitution, which cannot be checked")
        argv = [os.path.basename(argv[0]), *argv[1:]]
        prog = argv[0]
        self.programs.append(prog)
        if prog in INTERPRETERS:
            self._interpreter_input(argv, command, script)
        if prog in SHELLS | {"eval"} and self._runs_other_code(argv, command, script, cwd, privileged):
            return
        if prog == "find":
            self._find_exec(argv, command, script, cwd, privileged)
        level, reason = self._grade(argv, command, script, cwd)
        if privileged and level < DANGEROUS:
            level, reason = DANGEROUS, f"it runs as root ({prog} through sudo)"
        self.flag(level, reason)
        self.all_keys.append(rule_key(argv))
        if level > SAFE:
            self.keys.append(rule_key(argv))
        for word in argv[1:]:
            if not word.startswith("-") and (path := self._path(word, cwd)) is not None and os.path.lexists(path):
                self.reads.append(path)

    def _runs_other_code(self, argv, command: SimpleCommand, script: Script, cwd: Path, privileged: bool) -> bool:
        """``sh -c TEXT``, ``eval TEXT``, a shell fed a here-document: judge what they run."""
        if argv[0] == "eval":
            self.nested_text(" ".join(argv[1:]), cwd, privileged)
            return True
        for i, word in enumerate(argv[1:], 1):
            if word.startswith("-") and not word.startswith("--") and "c" in word[1:]:
                text = next((w for w in argv[i + 1 :] if not w.startswith("-")), None)
                if text is not None:
                    self.nested_text(text, cwd, privileged)
                return True
        if not [w for w in argv[1:] if not w.startswith("-")]:
            # A shell reading its script from stdin: a here-document, or what is piped in.
            pipeline = script.pipeline_of(command)
            fed = False
            for feeder in [command, *pipeline[: pipeline.index(command)]]:
                for redirect in feeder.redirects:
                    if redirect.op in ("<<", "<<-", "<<<"):
                        self.nested_text(redirect.target, cwd, privileged)
                        fed = True
                if feeder is not command and feeder.words and feeder.words[0] in ("echo", "printf"):
                    self.nested_text(" ".join(feeder.words[1:]), cwd, privileged)
                    fed = True
            return fed
        return False

    def _interpreter_input(self, argv, command: SimpleCommand, script: Script) -> None:
        """Code fetched from the network and run: ``curl ... | sh``, ``sh -c "$(curl ...)"``."""
        fetched = any(_runs(nested, DOWNLOADERS) for nested in command.nested)
        upstream = script.pipeline_of(command)
        fetched |= any(c is not command and c.words and os.path.basename(c.words[0]) in DOWNLOADERS for c in upstream[: upstream.index(command)])
        if fetched:
            self.flag(DANGEROUS, f"it runs code downloaded from the network ({argv[0]})")

    def _find_exec(self, argv, command: SimpleCommand, script: Script, cwd: Path, privileged: bool) -> None:
        i = 1
        while i < len(argv):
            if argv[i] in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((j for j in range(i + 1, len(argv)) if argv[j] in (";", "+")), len(argv))
                self.run(argv[i + 1 : end], command, script, cwd, privileged)
                i = end
            i += 1

    def _redirects(self, command: SimpleCommand, cwd: Path) -> None:
        for redirect in command.redirects:
            if redirect.op in (">", ">>", ">|", "&>", "&>>", "<>") or (redirect.op == ">&" and not redirect.target.isdigit()):
                if redirect.target != "-":
                    self._write(redirect.target, cwd)
            elif redirect.op == "<" and (path := self._path(redirect.target, cwd)) is not None:
                self.reads.append(path)

    def _write(self, word: str, cwd: Path) -> None:
        if _BLOCK_DEVICE.match(word):
            return self.flag(HARD, f"it writes raw data to the disk device {word}")
        path = self._path(word, cwd)
        if path is None:
            return
        text = str(path)
        if _BLOCK_DEVICE.match(text):
            return self.flag(HARD, f"it writes raw data to the disk device {text}")
        if text in _HARMLESS_DEVICES or text.startswith("/dev/fd/"):
            return
        inside = any(path == root or root in path.parents for root in self.roots)
        if not inside and text.startswith(_SYSTEM_DIRS) and not text.startswith(_TEMP_DIRS):
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

    # --- grading ---------------------------------------------------------------------

    def _grade(self, argv: list[str], command: SimpleCommand, script: Script, cwd: Path) -> tuple[int, str]:
        prog, args = argv[0], argv[1:]
        plain = [a for a in args if not a.startswith("-")]
        flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
        sub = plain[0] if plain else ""
        if prog.startswith("mkfs") or prog in _HARD_PROGRAMS:
            return HARD, f"{prog} can wipe disks or stop the machine"
        if (prog in ("init", "telinit") and sub in ("0", "6")) or (prog == "systemctl" and sub in ("poweroff", "reboot", "halt", "kexec")):
            return HARD, "it stops or restarts the machine"
        if prog in INTERPRETERS and any(_FORK_CODE.search(a) for a in args):
            return HARD, "a fork bomb"
        if prog in _WRITERS or prog in _MODE_WRITERS:
            return self._writer(prog, args, plain, flags, cwd)
        if prog == "dd":
            for arg in args:
                if arg.startswith("of="):
                    self._write(arg[3:], cwd)
            return DANGEROUS, "dd writes raw bytes"
        if prog == "git":
            return self._git(argv, cwd)
        if prog in _KILLERS or (prog == "fuser" and "k" in flags):
            return DANGEROUS, f"it stops processes ({prog})"
        if prog in ("systemctl", "service", "launchctl") and {"stop", "kill", "disable", "mask", "restart", "unload", "remove", "bootout"} & set(plain):
            return DANGEROUS, f"it stops services ({prog})"
        if (prog, sub) in _PUBLISH:
            return DANGEROUS, f"it publishes ({prog} {sub}), which cannot be undone"
        if (prog, sub) in _DESTROY or (prog == "docker" and ("prune" in plain or plain[:2] in (["volume", "rm"], ["rm", "-f"]))):
            return DANGEROUS, f"it destroys resources ({prog} {sub})"
        if (prog == "crontab" and "-r" in args) or (prog in ("iptables", "ip6tables") and {"-F", "--flush"} & set(args)):
            return DANGEROUS, f"it wipes system configuration ({prog})"
        if prog in ("dropdb", "dropuser") or self._sql_danger(prog, args, command, script):
            return DANGEROUS, "it drops or truncates database data"
        if prog in ("python", "python3") and sub == "manage.py" and "flush" in plain or prog in ("rails", "rake") and sub in ("db:drop", "db:reset") or prog == "prisma" and plain[:2] == ["migrate", "reset"]:
            return DANGEROUS, "it wipes a database"
        if prog == "aws" and plain[:2] in (["s3", "rm"], ["s3", "rb"]):
            return DANGEROUS, "it deletes cloud storage"
        if prog in ("curl", "wget"):
            for i, arg in enumerate(args[:-1]):
                if arg in ("-o", "--output", "-O" if prog == "wget" else "--output"):
                    self._write(args[i + 1], cwd)
            return NORMAL, f"{prog} reaches the network"
        if prog in SAFE_PROGRAMS:
            return self._maybe_safe(prog, args, plain, sub, cwd)
        return NORMAL, f"{prog} may change things"

    def _writer(self, prog, args, plain, flags, cwd) -> tuple[int, str]:
        recursive = "r" in flags.lower() or "--recursive" in args
        targets = plain[1:] if prog in _MODE_WRITERS else plain[-1:] if prog in ("cp", "install", "rsync", "ln") else plain
        if "--no-preserve-root" in args:
            return HARD, f"{prog} --no-preserve-root"
        if (prog in ("rm", "chmod", "chown", "chgrp") and recursive or prog == "mv") and any(self._is_root_target(t, cwd) for t in (targets if prog != "mv" else targets[:-1])):
            return HARD, f"{prog} on / or a home directory"
        for target in targets:
            self._write(target, cwd)
        if prog == "rm" and recursive:
            return DANGEROUS, "it deletes recursively (rm -r)"
        if prog in _MODE_WRITERS and recursive:
            return DANGEROUS, f"it changes permissions recursively ({prog} -R)"
        if prog == "shred":
            return DANGEROUS, "shred destroys file contents"
        return NORMAL, f"{prog} changes files"

    def _git(self, argv, cwd) -> tuple[int, str]:
        args = _skip_git_globals(argv[1:])
        sub, rest = (args[0], args[1:]) if args else ("", [])
        plain = [a for a in rest if not a.startswith("-")]
        flags = set(rest)
        short = "".join(a[1:] for a in rest if a.startswith("-") and not a.startswith("--"))
        if sub == "push" and (flags & {"-f", "--force", "--mirror", "--delete", "-d", "--prune", "--force-if-includes"} or any(a.startswith("--force-with-lease") for a in rest) or any(p.startswith(("+", ":")) for p in plain)):
            return DANGEROUS, "it force-pushes or deletes remote branches (git push)"
        if sub == "reset" and flags & {"--hard", "--merge", "--keep"}:
            return DANGEROUS, "git reset --hard discards uncommitted changes"
        if sub == "clean" and ("f" in short or "--force" in flags) and not ("n" in short or "--dry-run" in flags):
            return DANGEROUS, "git clean deletes untracked files"
        if sub == "checkout" and (flags & {"-f", "--force", "--"} or "." in plain):
            return DANGEROUS, "git checkout discards uncommitted changes"
        if sub == "restore" and not (flags & {"--staged", "-S"} and not flags & {"--worktree", "-W"}):
            return DANGEROUS, "git restore discards uncommitted changes"
        if (sub == "stash" and plain[:1] in (["drop"], ["clear"])) or (sub == "branch" and ("D" in short or ("d" in short or "--delete" in flags) and ("f" in short or "--force" in flags))):
            return DANGEROUS, f"git {sub} deletes work that may not be saved elsewhere"
        if sub in ("filter-branch", "filter-repo") or (sub == "reflog" and plain[:1] in (["expire"], ["delete"])) or (sub == "gc" and any(a.startswith("--prune") for a in rest)) or (sub == "update-ref" and "-d" in flags):
            return DANGEROUS, f"git {sub} rewrites or prunes history"
        if sub == "config" and flags & {"--global", "--system"}:
            self.writes.append(self.home / ".gitconfig")
            return NORMAL, "it changes git's global configuration"
        read_only = (
            sub in _GIT_READ
            or (sub == "branch" and (not plain or flags & {"--list", "-l", "-a", "-r", "-v", "-vv", "--show-current", "--contains", "--merged"}) and not short.strip("avrl"))
            or (sub == "tag" and (not plain or flags & {"-l", "--list"}))
            or (sub == "remote" and (not plain or plain[0] in ("show", "get-url")))
            or (sub == "stash" and plain[:1] in (["list"], ["show"]))
            or (sub == "config" and flags & {"--get", "--list", "-l", "--get-all", "--get-regexp"})
            or (sub in ("reflog", "worktree") and plain[:1] in ([], ["show"], ["list"]))
        )
        return (SAFE, "it only reads the repository") if read_only else (NORMAL, f"git {sub} changes the repository")

    def _maybe_safe(self, prog, args, plain, sub, cwd: Path) -> tuple[int, str]:
        flags = set(args)
        unsafe = {
            "sort": lambda: flags & {"-o", "--output"} or any(a.startswith("--output=") for a in args),
            "sed": lambda: any(a.startswith("-i") or a.startswith("--in-place") or (a.startswith("-") and not a.startswith("--") and "i" in a) for a in args),
            "find": lambda: flags & {"-delete", "-fprint", "-fprintf", "-fls", "-fprint0"},
            "fd": lambda: flags & {"-x", "--exec", "-X", "--exec-batch"},
            "tsc": lambda: "--noEmit" not in flags,
            "black": lambda: not flags & {"--check", "--diff"},
            "isort": lambda: not flags & {"--check", "--check-only", "--diff", "-c"},
            "prettier": lambda: not flags & {"--check", "-c", "--list-different", "-l"},
            "python": lambda: not (args[:2] in (["-m", "pytest"], ["-m", "unittest"], ["-m", "mypy"], ["-m", "pyflakes"]) or args in (["--version"], ["-V"])),
            "node": lambda: args not in (["--version"], ["-v"]),
            "env": lambda: bool(args),
            "command": lambda: args[:1] not in (["-v"], ["-V"]),
        }
        unsafe["python3"] = unsafe["python"]
        if prog == "find" and flags & {"-delete"}:
            start = plain[0] if plain else "."
            if self._is_root_target(start, cwd):
                return HARD, "find -delete on / or a home directory"
            return DANGEROUS, "find -delete deletes recursively"
        if prog in _SAFE_SUBCOMMANDS:
            first = args[0] if args else ""
            if (first if first.startswith("-") else sub) not in _SAFE_SUBCOMMANDS[prog] and not (prog in ("npm", "yarn", "pnpm", "bun") and plain[:2] == ["run", "test"]):
                return NORMAL, f"{prog} {sub}".strip() + " may change things"
        if flags & _FIX_FLAGS or (unsafe.get(prog) or (lambda: False))():
            return NORMAL, f"{prog} with these options writes files"
        return SAFE, "it only reads or runs the project's checks"

    def _sql_danger(self, prog, args, command: SimpleCommand, script: Script) -> bool:
        if prog not in _DB_CLIENTS:
            return False
        texts = list(args) + [r.target for r in command.redirects if r.op in ("<<", "<<-", "<<<")]
        for upstream in script.pipeline_of(command):
            texts.extend(upstream.words)
            texts.extend(r.target for r in upstream.redirects if r.op in ("<<", "<<-", "<<<"))
        return any(_SQL_DANGER.search(text) for text in texts)


def _runs(script: Script, programs: set[str]) -> bool:
    return any(c.words and os.path.basename(c.words[0]) in programs for s in script.walk() for c in s.commands)
