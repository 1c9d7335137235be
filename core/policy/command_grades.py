"""How each program is graded from its arguments: writers, git, network clients, databases,
readers whose options write or run things. A mixin of ``core.policy.command_rules``' judge, which
supplies ``flag``, the path helpers and the walk into nested commands.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from core.policy import command_args as args_
from core.policy import command_code as code_
from core.policy.command_args import DANGEROUS, HARD, NORMAL, SAFE
from core.policy.command_tables import (
    AWKS,
    INTERPRETERS,
    NETWORK_SCHEMES,
    PYTHON_MODULES_READ,
    READERS,
    RUNS_PROJECT_CODE,
    SUBCOMMAND_READS,
    SUBCOMMAND_RUNS_CODE,
    git_key_runs_code,
    names,
    network_use,
)
from core.policy.commands import Script, SimpleCommand

if TYPE_CHECKING:
    from core.policy.command_args import Effects

_WRITERS = {"cp", "mv", "install", "rsync", "ln", "touch", "mkdir", "rm", "rmdir", "unlink", "truncate", "tee", "shred"}
_MODE_WRITERS = {"chmod", "chown", "chgrp"}
_HARD_PROGRAMS = names("mke2fs mkswap fdisk sfdisk cfdisk parted gdisk sgdisk wipefs shutdown reboot halt poweroff")
_KILLERS = {"kill", "killall", "pkill", "skill", "xkill", "taskkill"}
_DB_CLIENTS = names(
    "psql mysql mariadb sqlite3 sqlcmd duckdb clickhouse clickhouse-client cockroach mongosh mongo redis-cli pgcli mycli litecli"
)
_SQL_DANGER = re.compile(
    r"\b(drop\s+(table|database|schema|index|view|user|role|collection)|truncate(\s+table)?\s+\w|flushall|flushdb|dropdatabase\s*\()", re.I
)
_PUBLISH = {
    ("npm", "publish"),
    ("yarn", "publish"),
    ("pnpm", "publish"),
    ("cargo", "publish"),
    ("twine", "upload"),
    ("gem", "push"),
    ("poetry", "publish"),
    ("uv", "publish"),
    ("docker", "push"),
}
_DESTROY = {("terraform", "destroy"), ("kubectl", "delete"), ("helm", "uninstall"), ("helm", "delete"), ("gcloud", "delete")}
_FORK_CODE = re.compile(r"fork\s+while\s+fork|while\s*\(?\s*(true|1)\s*\)?\s*:?\s*os\.fork\(\)", re.I)
_REMOTE = re.compile(r"^(?:[\w.+-]+@)?[\w.-]+:(?!//)|^[\w.-]+::|^rsync://")
_GIT_READ = names(
    "status diff log show blame shortlog describe rev-parse ls-files ls-tree ls-remote cat-file show-ref merge-base for-each-ref "
    "rev-list name-rev whatchanged diff-tree diff-index diff-files count-objects version help check-ignore grep --version"
)


class Grades:
    """Per-program grading, mixed into the judge."""

    __slots__ = ()

    if TYPE_CHECKING:
        # What the judge supplies.
        home: Path
        reads: list[Path]

        def flag(self, level: int, reason: str) -> None: ...
        def apply(self, effects: Effects, cwd: Path, *, sends: bool = False) -> None: ...
        def nested_text(self, text: str, cwd: Path, privileged: bool) -> None: ...
        def run(
            self,
            argv: list[str],
            command: SimpleCommand,
            script: Script,
            cwd: Path,
            privileged: bool,
            source: tuple[str, str | None] | None = None,
        ) -> None: ...
        def _write(self, word: str, cwd: Path) -> None: ...
        def _write_path(self, path: Path) -> None: ...
        def _path(self, word: str, cwd: Path) -> Path | None: ...
        def _is_root_target(self, word: str, cwd: Path) -> bool: ...
        def _read_program(self, word: str, cwd: Path) -> str | None: ...

    def _network(self, prog: str, argv: list[str], level: int, cwd: Path) -> bool:
        """Flags what a network client runs locally; True when the command reaches the network."""
        args = argv[1:]
        words = [a for a in (args_.git_globals(args)[3] if prog == "git" else args) if not a.startswith("-")]
        reaches = bool(
            network_use(prog, words)
            or prog == "rsync"
            and any(_REMOTE.match(a) for a in words)
            or prog == "pacman"
            and any(re.match(r"^-[A-Za-z]*[SU]", a) for a in args)
            or level > SAFE
            and any(a.startswith(NETWORK_SCHEMES) or re.match(r"^[\w.-]+@[\w.-]+:", a) for a in args)
        )
        if prog in ("ssh", "scp", "sftp", "rsync", "git"):
            for i, word in enumerate(args):
                value = args[i + 1] if word == "-o" and i + 1 < len(args) else word[2:] if word.startswith("-o") else ""
                if re.match(
                    r"(?i)(proxycommand|localcommand|knownhostscommand|pkcs11provider|securitykeyprovider|permitlocalcommand)\b", value
                ):
                    self.flag(DANGEROUS, f"{prog} runs a local command or library ({value.split('=')[0]})")
                if prog in ("rsync", "scp") and word in ("-e", "--rsh", "-S") and i + 1 < len(args):
                    self.nested_text(args[i + 1], cwd, False)
        return reaches

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
        if prog in ("systemctl", "service", "launchctl") and {
            "stop",
            "kill",
            "disable",
            "mask",
            "restart",
            "unload",
            "remove",
            "bootout",
        } & set(plain):
            return DANGEROUS, f"it stops services ({prog})"
        if prog in ("hermes-editor", "hermes-mcp") and (
            {"approvals", "pairing", "--trust-client-approvals"} & set(plain + args) or sub == "setup"
        ):
            return DANGEROUS, f"it answers approvals or changes who may act ({prog} {sub}); only you may do that"
        if (prog, sub) in _PUBLISH:
            return DANGEROUS, f"it publishes ({prog} {sub}), which cannot be undone"
        if (prog, sub) in _DESTROY or (prog == "docker" and ("prune" in plain or plain[:2] in (["volume", "rm"], ["rm", "-f"]))):
            return DANGEROUS, f"it destroys resources ({prog} {sub})"
        if (prog == "crontab" and "-r" in args) or (prog in ("iptables", "ip6tables") and {"-F", "--flush"} & set(args)):
            return DANGEROUS, f"it wipes system configuration ({prog})"
        if prog == "crontab" and not {"-l", "--list"} & set(args) or prog in ("at", "batch"):
            return DANGEROUS, f"it installs commands that run later ({prog})"
        if prog in ("docker", "podman", "nerdctl") and {"run", "create", "exec"} & set(plain[:2]) and _host_access(args):
            return DANGEROUS, f"it gives a container this machine ({prog} {sub} with the host's root, PID space or engine)"
        if prog in ("dropdb", "dropuser") or self._sql_danger(prog, args, command, script):
            return DANGEROUS, "it drops or truncates database data"
        if (
            prog in ("python", "python3")
            and sub == "manage.py"
            and "flush" in plain
            or prog in ("rails", "rake")
            and sub in ("db:drop", "db:reset")
            or prog == "prisma"
            and plain[:2] == ["migrate", "reset"]
        ):
            return DANGEROUS, "it wipes a database"
        if prog == "aws" and plain[:2] in (["s3", "rm"], ["s3", "rb"]):
            return DANGEROUS, "it deletes cloud storage"
        if prog in ("parallel", "rush"):
            return DANGEROUS, f"it runs commands built from its input ({prog})"
        if prog in ("curl", "wget", "http", "https", "xh", "xhs"):
            inspect = args_.curl_effects if prog == "curl" else args_.wget_effects if prog == "wget" else args_.httpie_effects
            self.apply(inspect(args), cwd, sends=True)
            return NORMAL, f"{prog} reaches the network"
        if prog in ("tar", "gtar", "bsdtar"):
            effects = args_.tar_effects(args)
            self.apply(effects, cwd)
            return (effects.level, effects.reason) if effects.level else (SAFE, "it only reads (tar lists an archive)")
        if prog == "zip" and any(a == "-TT" or a.startswith("--unzip-command") for a in args):
            return DANGEROUS, "zip runs the program given to test the archive (-TT)"
        if prog in RUNS_PROJECT_CODE:
            return NORMAL, f"it runs the project's code ({prog})"
        if prog in ("python", "python3", "python2") and args[:1] == ["-m"] and len(args) > 1 and args[1] in PYTHON_MODULES_READ:
            return SAFE, "it only reads"
        if prog in SUBCOMMAND_READS or prog in SUBCOMMAND_RUNS_CODE:
            first = args[0] if args else ""
            word = first if first.startswith("-") or prog in ("python", "python3", "python2", "node") else sub
            if word in SUBCOMMAND_RUNS_CODE.get(prog, ()):
                name = f"{prog} {' '.join(plain[:2]) if word == 'run' and len(plain) > 1 else word}"
                return NORMAL, f"it runs the project's code ({name})"
            if word not in SUBCOMMAND_READS.get(prog, ()):
                return NORMAL, f"{prog} {sub}".strip() + " may change things"
            if prog == "go" and word == "env" and {"-w", "-u"} & set(args):
                return NORMAL, "go env -w changes go's settings"
            if prog not in READERS:
                return SAFE, "it only reads"
        if prog in READERS:
            return self._reader(prog, args, plain, cwd)
        return NORMAL, f"{prog} may change things"

    def _writer(self, prog: str, args: list[str], plain: list[str], flags: str, cwd: Path) -> tuple[int, str]:
        recursive = "r" in flags.lower() or "--recursive" in args
        targets = plain[1:] if prog in _MODE_WRITERS else plain[-1:] if prog in ("cp", "install", "rsync", "ln") else plain
        if "--no-preserve-root" in args:
            return HARD, f"{prog} --no-preserve-root"
        if (prog in ("rm", "chmod", "chown", "chgrp") and recursive or prog == "mv") and any(
            self._is_root_target(t, cwd) for t in (targets if prog != "mv" else targets[:-1])
        ):
            return HARD, f"{prog} on / or a home directory"
        for target in targets:
            if not (prog == "rsync" and _REMOTE.match(target)):
                self._write(target, cwd)
        if prog == "rm" and recursive:
            return DANGEROUS, "it deletes recursively (rm -r)"
        if prog in _MODE_WRITERS and recursive:
            return DANGEROUS, f"it changes permissions recursively ({prog} -R)"
        if prog == "shred":
            return DANGEROUS, "shred destroys file contents"
        return NORMAL, f"{prog} changes files"

    def _git(self, argv: list[str], cwd: Path) -> tuple[int, str]:
        settings, dirs, special, args = args_.git_globals(argv[1:])
        for directory in dirs:
            cwd = self._path(directory, cwd) or cwd
        for key, value in settings:
            if git_key_runs_code(key, value):
                self.flag(DANGEROUS, f"it sets git's {key}, which makes git run a program")
            self.flag(NORMAL, "it changes git's settings for this run (-c), which can make git run programs")
        if "--exec-path" in special:
            self.flag(DANGEROUS, "git runs its commands from another directory (--exec-path)")
        if "--git-dir" in special:
            self.flag(NORMAL, "it points git at another repository, whose settings can make git run programs")
        sub, rest = (args[0], args[1:]) if args else ("", [])
        plain = [a for a in rest if not a.startswith("-")]
        flags = set(rest)
        short = "".join(a[1:] for a in rest if a.startswith("-") and not a.startswith("--"))
        self._git_options(sub, rest, plain, cwd)
        if sub == "push" and (
            flags & {"-f", "--force", "--mirror", "--delete", "-d", "--prune", "--force-if-includes"}
            or any(a.startswith("--force-with-lease") for a in rest)
            or any(p.startswith(("+", ":")) for p in plain)
        ):
            return DANGEROUS, "it force-pushes or deletes remote branches (git push)"
        if sub == "reset" and flags & {"--hard", "--merge", "--keep"}:
            return DANGEROUS, "git reset --hard discards uncommitted changes"
        if sub == "clean" and ("f" in short or "--force" in flags) and not ("n" in short or "--dry-run" in flags):
            return DANGEROUS, "git clean deletes untracked files"
        if sub == "checkout" and (flags & {"-f", "--force", "--"} or "." in plain):
            return DANGEROUS, "git checkout discards uncommitted changes"
        if sub == "restore" and not (flags & {"--staged", "-S"} and not flags & {"--worktree", "-W"}):
            return DANGEROUS, "git restore discards uncommitted changes"
        if (sub == "stash" and plain[:1] in (["drop"], ["clear"])) or (
            sub == "branch" and ("D" in short or ("d" in short or "--delete" in flags) and ("f" in short or "--force" in flags))
        ):
            return DANGEROUS, f"git {sub} deletes work that may not be saved elsewhere"
        if (
            sub in ("filter-branch", "filter-repo")
            or (sub == "reflog" and plain[:1] in (["expire"], ["delete"]))
            or (sub == "gc" and any(a.startswith("--prune") for a in rest))
            or (sub == "update-ref" and "-d" in flags)
        ):
            return DANGEROUS, f"git {sub} rewrites or prunes history"
        if sub == "config":
            return self._git_config(rest, cwd)
        read_only = (
            sub in _GIT_READ
            or (
                sub == "branch"
                and (not plain or flags & {"--list", "-l", "-a", "-r", "-v", "-vv", "--show-current", "--contains", "--merged"})
                and not short.strip("avrl")
            )
            or (sub == "tag" and (not plain or flags & {"-l", "--list"}))
            or (sub == "remote" and (not plain or plain[0] in ("show", "get-url")))
            or (sub == "stash" and plain[:1] in (["list"], ["show"]))
            or (sub in ("reflog", "worktree") and plain[:1] in ([], ["show"], ["list"]))
        )
        return (SAFE, "it only reads the repository") if read_only else (NORMAL, f"git {sub} changes the repository")

    def _git_options(self, sub: str, rest: list[str], plain: list[str], cwd: Path) -> None:
        """Options of git subcommands that run programs or write files."""
        for i, arg in enumerate(rest):
            name, eq, value = arg.partition("=")
            value = value if eq else (rest[i + 1] if i + 1 < len(rest) else "")
            if name in ("--upload-pack", "--receive-pack", "--exec") or name == "-u" and sub in ("clone", "ls-remote"):
                self.flag(DANGEROUS, f"git runs the program given on its command line ({name})")
            elif name == "--template" and sub in ("clone", "init"):
                self.flag(DANGEROUS, "git copies hooks from another directory (--template)")
            elif name in ("-c", "--config") and sub == "clone":
                key, _, val = value.partition("=")
                self.flag(DANGEROUS if git_key_runs_code(key, val) else NORMAL, f"it sets git's {key} in the new repository")
            elif name in ("--output", "--output-directory") or name == "-o" and sub in ("format-patch", "archive"):
                self._write(value, cwd)
            elif name in ("--ext-diff", "--textconv"):
                self.flag(NORMAL, f"git runs the diff programs the repository configures ({name})")
            elif sub == "grep" and (name.startswith("-O") or name == "--open-files-in-pager"):
                self.flag(DANGEROUS, "git grep runs a program on the files it finds (-O)")
            elif sub == "difftool" and name in ("-x", "--extcmd"):
                self.flag(DANGEROUS, "git difftool runs the program given on its command line (-x)")
            elif sub == "rebase" and name in ("-x", "--exec"):
                self.nested_text(value, cwd, False)
        if any(p.startswith(("ext::", "fd::")) for p in plain):
            self.flag(DANGEROUS, "git runs a command as its transport (ext::)")
        if sub == "difftool":
            self.flag(NORMAL, "git difftool runs the configured diff tool")
        if sub == "bisect" and plain[:1] == ["run"]:
            self.run(rest[rest.index("run") + 1 :], SimpleCommand([]), Script(), cwd, False)
        if sub == "submodule" and "foreach" in rest:
            self.nested_text(" ".join(a for a in rest[rest.index("foreach") + 1 :] if a != "--recursive"), cwd, False)
        if sub == "bundle" and plain[:1] == ["create"] and len(plain) > 1:
            self._write(plain[1], cwd)

    def _git_config(self, rest: list[str], cwd: Path) -> tuple[int, str]:
        target, reading, changing, operands = None, False, False, []
        for option, value in args_.scan(rest, {"-f", "--file", "--blob", "--type", "--default", "--comment"}):
            if option is None:
                operands.append(value or "")
            elif option == "--global":
                target = self.home / ".gitconfig"
            elif option == "--system":
                target = Path("/etc/gitconfig")
            elif option in ("-f", "--file") and value:
                target = self._path(value, cwd)
            elif option in ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color", "--get-colorbool"):
                reading = True
            elif option in ("--unset", "--unset-all", "--add", "--replace-all", "--rename-section", "--remove-section", "-e", "--edit"):
                changing = True
        if operands[:1] in (["list"], ["get"]):
            reading, operands = True, operands[1:]
        elif operands[:1] in (["set"], ["unset"], ["rename-section"], ["remove-section"], ["edit"]):
            changing, operands = True, operands[1:]
        if reading and not changing or len(operands) == 1 and not changing:
            return SAFE, "it only reads the repository"
        key = operands[0] if operands else ""
        if key and git_key_runs_code(key, operands[1] if len(operands) > 1 else ""):
            self.flag(DANGEROUS, f"it sets git's {key}, which makes git run a program")
        path = target or args_.git_config_file(cwd)
        self.flag(
            NORMAL,
            "it changes git's global configuration" if target == self.home / ".gitconfig" else f"it changes git's configuration ({path})",
        )
        if path is not None:
            self._write_path(path)
        return NORMAL, "git config changes git's configuration"

    def _reader(self, prog: str, args: list[str], plain: list[str], cwd: Path) -> tuple[int, str]:
        """Programs that only read, unless one of their options writes or runs something."""
        flags = set(args)
        read = lambda word: self._read_program(word, cwd)  # noqa: E731
        if prog == "sed" or prog in AWKS:
            effects = code_.sed_effects(args, read) if prog == "sed" else code_.awk_effects(args, read)
            self.apply(effects, cwd)
            for program in effects.programs:
                if any(args_.unchecked(a) and program in a for a in args):
                    if "$(" in program or "`" in program:
                        self.flag(DANGEROUS, f"its {prog} program is made by a command substitution, which cannot be checked")
                    self.flag(NORMAL, f"its {prog} program depends on a variable")
        elif prog == "sort":
            for option, value in args_.scan(
                args,
                {
                    "-o",
                    "--output",
                    "-k",
                    "-t",
                    "-S",
                    "-T",
                    "--compress-program",
                    "--files0-from",
                    "--random-source",
                    "--parallel",
                    "--batch-size",
                    "--key",
                    "--field-separator",
                    "--buffer-size",
                    "--temporary-directory",
                },
            ):
                if option in ("-o", "--output") and value:
                    self._write(value, cwd)
                elif option == "--compress-program":
                    self.flag(DANGEROUS, f"sort runs a program to compress its temporary files ({value})")
        elif prog in ("uniq", "xxd"):
            values = (
                {"-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars"}
                if prog == "uniq"
                else {"-c", "-g", "-l", "-s", "-o", "-n", "-cols", "-len", "-seek", "-name"}
            )
            operands = [v for o, v in args_.scan(args, values) if o is None and v is not None]
            if len(operands) > 1 and operands[1] != "-":
                self._write(operands[1], cwd)
        elif prog in ("rg", "ag") and any(a in ("--pre", "--pager") or a.startswith(("--pre=", "--pager=")) for a in args):
            self.flag(DANGEROUS, f"{prog} runs a program on every file it searches (--pre)")
        elif prog == "find":
            if "-delete" in flags:
                start = plain[0] if plain else "."
                return (
                    (HARD, "find -delete on / or a home directory")
                    if self._is_root_target(start, cwd)
                    else (DANGEROUS, "find -delete deletes recursively")
                )
            for i, arg in enumerate(args[:-1]):
                if arg in ("-fprint", "-fprint0", "-fprintf", "-fls"):
                    self._write(args[i + 1], cwd)
        elif prog == "tree" and "-o" in args[:-1]:
            self._write(args[args.index("-o") + 1], cwd)
        elif prog == "man" and any(a in ("-P", "-H") or a.startswith(("--pager", "--html", "-P", "-H")) for a in args):
            return NORMAL, "man runs the program given as its pager or browser"
        elif prog == "less":
            for option, value in args_.scan(
                args, {"-o", "-O", "--log-file", "--LOG-FILE", "-k", "--lesskey-file", "-x", "-y", "-b", "-h", "-j", "-z", "-P", "-T", "-t"}
            ):
                if option in ("-o", "-O", "--log-file", "--LOG-FILE") and value:
                    self._write(value, cwd)
                elif option in ("-k", "--lesskey-file"):
                    self.flag(NORMAL, "less reads key bindings that can run commands")
            if any(a.startswith("+") and set(a) & set("!|") for a in args):
                self.flag(DANGEROUS, "less runs a shell command given as its first command")
        elif prog == "date":
            found = list(args_.scan(args, {"-d", "--date", "-f", "--file", "-r", "--reference", "-s", "--set"}))
            if any(o in ("-s", "--set") or o is None and not (v or "").startswith("+") for o, v in found):
                return DANGEROUS, "it sets the system clock"
        elif prog == "hostname" and (plain or "-F" in flags or "--file" in flags):
            return DANGEROUS, "it changes the machine's name"
        elif prog == "ps" and any(not a.startswith("-") and "e" in a for a in args):
            self.reads.append(Path("/proc"))  # BSD-style `e` shows every process's environment
        elif prog == "file" and ("-C" in flags or "--compile" in flags):
            return NORMAL, "file -C writes a compiled magic file"
        elif prog == "ruff":
            sub = plain[0] if plain else ""
            for option, value in args_.scan(args, {"-o", "--output-file", "--config"}):
                if option in ("-o", "--output-file") and value:
                    self._write(value, cwd)
            if sub == "format" and not flags & {"--check", "--diff"}:
                return NORMAL, "ruff format with these options writes files"
            if (
                sub not in ("check", "format", "")
                or flags & {"--fix", "--fix-only", "--unsafe-fixes", "--add-noqa", "--watch"}
                and "--no-fix" not in flags
            ):
                return NORMAL, f"ruff {sub} with these options writes files".replace("  ", " ")
        elif prog == "black" and not flags & {"--check", "--diff"}:
            return NORMAL, "black without --check writes files"
        return SAFE, "it only reads"

    def _sql_danger(self, prog: str, args: list[str], command: SimpleCommand, script: Script) -> bool:
        if prog not in _DB_CLIENTS:
            return False
        texts = list(args) + [r.target for r in command.redirects if r.op in ("<<", "<<-", "<<<")]
        for upstream in script.pipeline_of(command):
            texts.extend(upstream.words)
            texts.extend(r.target for r in upstream.redirects if r.op in ("<<", "<<-", "<<<"))
        return any(_SQL_DANGER.search(text) for text in texts)


def _host_access(args: list[str]) -> bool:
    """Container options that hand it the host: privileged, the host's PID space, / or the engine's socket."""
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
        if name == "--privileged" and (not eq or value.lower() == "true") or name == "--cap-add" and value.lower() in ("all", "sys_admin"):
            return True
        if name in ("--pid", "--userns", "--ipc", "--uts") and value == "host":
            return True
        if name in ("-v", "--volume", "--mount") and (
            value.startswith("/:") or re.search(r"(^|,)(source|src)=/(,|$)", value) or "docker.sock" in value
        ):
            return True
    return False
