"""What programs do, as data: which run other commands (wrappers), which only read, which run
the project's code, which reach the network, and which variables and git settings make programs
run other code.

``core.policy.command_rules`` consults these tables; keeping them here keeps the grader's logic short
and the tables easy to extend.
"""

from __future__ import annotations

import fnmatch


def words(text: str) -> tuple[str, ...]:
    """Names written as one whitespace-separated string, in order."""
    return tuple(text.split())


def names(text: str) -> frozenset[str]:
    """A set of names written as one whitespace-separated string."""
    return frozenset(text.split())


def subcommands(text: str) -> frozenset[str]:
    """Subcommands of one or two words, written as one comma-separated string (``"install, add, compose up"``)."""
    return frozenset(word.strip() for word in text.split(","))


SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "yash", "posh", "csh", "tcsh"})
# Interpreters and how they take inline code (``python -c CODE``); the name used in reasons.
INLINE_CODE: dict[str, tuple[str, frozenset[str]]] = {
    **{p: ("python", frozenset({"-c"})) for p in ("python", "python2", "python3", "pypy", "pypy3")},
    "perl": ("perl", frozenset({"-e", "-E"})),
    "ruby": ("ruby", frozenset({"-e"})),
    "node": ("node", frozenset({"-e", "-p", "--eval", "--print"})),
    "nodejs": ("node", frozenset({"-e", "-p", "--eval", "--print"})),
    "bun": ("bun", frozenset({"-e", "-p", "--eval", "--print"})),
    "php": ("php", frozenset({"-r"})),
    "lua": ("lua", frozenset({"-e"})),
    "luajit": ("lua", frozenset({"-e"})),
    "Rscript": ("R", frozenset({"-e"})),
    "R": ("R", frozenset({"-e"})),
    "julia": ("julia", frozenset({"-e", "-E", "--eval", "--print"})),
    "osascript": ("AppleScript", frozenset({"-e"})),
    "pwsh": ("PowerShell", frozenset({"-c", "-command", "-encodedcommand", "-ec", "-e", "-enc"})),
    "powershell": ("PowerShell", frozenset({"-c", "-command", "-encodedcommand", "-ec", "-e", "-enc"})),
    "elixir": ("elixir", frozenset({"-e"})),
    "groovy": ("groovy", frozenset({"-e"})),
    "tclsh": ("tcl", frozenset()),
    "deno": ("deno", frozenset()),
}
# Programs that read a program from stdin when given no script (``curl ... | python3``).
INTERPRETERS = SHELLS | frozenset(INLINE_CODE) | {"source", ".", "eval"}
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "xhs"})
AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})

# Programs that run another command given after their own options: their options that take a
# value, and how many operands come before the command (``timeout 5 CMD``, ``chroot DIR CMD``).
WRAPPER_OPTIONS = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group", "--chdir", "--prompt", "--host"},
    "doas": {"-u", "-C"},
    "runuser": {"-u", "-g", "-G", "--user", "--group", "--supp-group"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-t", "--class", "--classdata"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "gtimeout": {"-s", "--signal", "-k", "--kill-after"},
    "stdbuf": {"-i", "-o", "-e"},
    "flock": {"-w", "-E", "--timeout", "--conflict-exit-code"},
    "time": {"-f", "-o", "--format", "--output"},
    "exec": {"-a"},
    "xargs": {"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "--max-args", "--max-procs", "--delimiter", "--arg-file", "--max-lines"},
    "env": {"-u", "--unset", "-C", "--chdir"},
    "npx": {"-p", "--package"},
    "watch": {"-n", "--interval", "-q", "--equexit"},
    "unshare": {"-S", "-G", "-R", "-w", "--setuid", "--setgid", "--root", "--wd", "--propagation", "--setgroups"},
    "nsenter": {"-t", "-S", "-G", "--target", "--setuid", "--setgid"},
    "chroot": {"--userspec", "--groups"},
    "systemd-run": set(
        names("-u -p -E -M -H --unit --property --setenv --machine --host --uid --gid --nice --slice --description --working-directory")
    ),
    "strace": {"-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-b", "-I", "-X", "--output"},
    "ltrace": {"-o", "-e", "-p", "-s", "-u", "-a", "-n", "--output"},
    "firejail": set(),
    "flatpak-spawn": set(),
    "torsocks": set(),
    "proxychains": {"-f"},
    "proxychains4": {"-f"},
    "nohup": set(),
    "setsid": set(),
    "builtin": set(),
    "command": set(),
    "unbuffer": set(),
    "caffeinate": set(),
    "bunx": set(),
    "pnpx": set(),
    "fakeroot": set(),
    "dbus-run-session": set(),
    "xvfb-run": set(),
    "catchsegv": set(),
    "coproc": set(),
    "uvx": {"--from", "--with", "-p", "--python"},
}
WRAPPER_POSITIONALS = {"timeout": 1, "gtimeout": 1, "flock": 1, "chrt": 1, "taskset": 1, "chroot": 1}
RUNNERS = {
    ("uv", "run"),
    ("poetry", "run"),
    ("pipenv", "run"),
    ("pdm", "run"),
    ("hatch", "run"),
    ("rye", "run"),
    ("bundle", "exec"),
    ("pnpm", "exec"),
    ("npm", "exec"),
    ("yarn", "exec"),
}
ELSEWHERE = {"unshare", "nsenter", "chroot", "systemd-run", "flatpak-spawn"}  # run past the sandbox or as a service
BWRAP_ARITY = {
    **dict.fromkeys(
        words(
            "--bind --ro-bind --dev-bind --bind-try --ro-bind-try --dev-bind-try --symlink --setenv --file --bind-data "
            "--ro-bind-data --chmod"
        ),
        2,
    ),
    **dict.fromkeys(
        words(
            "--chdir --tmpfs --proc --dev --dir --uid --gid --hostname --unsetenv --lock-file --seccomp --args --cap-add --cap-drop "
            "--perms --size --remount-ro --exec-label --file-label --userns --userns2 --pidns --sync-fd --info-fd --json-status-fd "
            "--block-fd --userns-block-fd --overlay-src --tmp-overlay --ro-overlay --mqueue --argv0"
        ),
        1,
    ),
    "--overlay": 3,
}

# Programs that only read (files, the environment, the repository): safe unless an option says
# otherwise (command_rules checks those options program by program).
READERS = AWKS | names(
    "ls dir vdir cat head tail wc grep egrep fgrep rg ag ack pwd echo printf which whereis type whoami id date uname hostname "
    "printenv file stat du df tree diff cmp uniq cut tr basename dirname realpath readlink jq true false test [ seq md5sum sha1sum "
    "sha224sum sha256sum sha384sum sha512sum b2sum shasum cksum sum xxd hexdump od strings nl column comm join paste fold tac rev "
    "sleep cd pushd popd dirs export set unset alias unalias : less more ps free uptime nproc arch groups exit local declare typeset "
    "readonly read wait jobs command env trap sort sed find fd fdfind git man busybox toybox expr base64 base32 basenc numfmt expand "
    "unexpand fmt pr look tsort shuf yes lsblk lscpu lsof locale tty users who w last getconf logname cal hash ruff black pyflakes "
    "pycodestyle"
)
# Checkers and test runners: they import or build the project, so they run its code (a
# conftest.py, a Makefile, a build.rs, a config file that loads plugins).
RUNS_PROJECT_CODE = names(
    "pytest py.test jest vitest mocha ava rspec phpunit ctest tsc eslint mypy dmypy pyright basedpyright pylint flake8 prettier "
    "isort lint-imports make gmake ninja tox nox rake karma jasmine cypress playwright stylelint tap nyc c8 behave nosetests ward "
    "hypothesis golangci-lint staticcheck cmake meson bazel buck sbt lein stack cabal swift xcodebuild"
)
# Programs whose first word decides: subcommands that only read, and those that run the
# project's code. Anything else they do "may change things".
SUBCOMMAND_READS: dict[str, frozenset[str]] = {
    "cargo": frozenset({"--version", "-V", "version", "help", "--help"}),
    "go": frozenset({"version", "help", "env"}),
    "npm": frozenset({"ls", "list", "ll", "la", "--version", "-v", "help", "prefix", "root"}),
    "yarn": frozenset({"list", "--version", "-v", "help"}),
    "pnpm": frozenset({"list", "ls", "--version", "-v", "help"}),
    "bun": frozenset({"--version", "-v", "pm"}),
    "dotnet": frozenset({"--version", "--info", "--list-sdks", "--list-runtimes"}),
    "deno": frozenset({"--version", "-V", "help"}),
    "ruff": frozenset({"check", "format", "--version", "version", "help"}),
    "python": frozenset({"--version", "-V"}),
    "python3": frozenset({"--version", "-V"}),
    "python2": frozenset({"--version", "-V"}),
    "node": frozenset({"--version", "-v"}),
}
SUBCOMMAND_RUNS_CODE: dict[str, frozenset[str]] = {
    "cargo": frozenset(
        {"test", "t", "check", "c", "clippy", "build", "b", "run", "r", "bench", "doc", "d", "miri", "nextest", "llvm-cov", "tarpaulin"}
    ),
    "go": frozenset({"test", "vet", "run", "build", "generate", "install", "list"}),
    "npm": frozenset({"test", "t", "tst", "run", "run-script", "start", "stop", "restart", "rebuild"}),
    "yarn": frozenset({"test", "run", "start", "build", "lint"}),
    "pnpm": frozenset({"test", "t", "run", "start"}),
    "bun": frozenset({"test", "run"}),
    "dotnet": frozenset({"test", "build", "run"}),
    "mvn": frozenset({"test", "verify", "compile", "package", "install"}),
    "mvnw": frozenset({"test", "verify", "compile", "package", "install"}),
    "gradle": frozenset({"test", "check", "build", "run"}),
    "gradlew": frozenset({"test", "check", "build", "run"}),
    "mix": frozenset({"test", "compile", "run"}),
    "deno": frozenset({"test", "check", "lint", "run", "task", "bench"}),
    "rails": frozenset({"test"}),
    "bundle": frozenset({"exec"}),
}
# ``python -m X``: modules judged as the program of the same name.
PYTHON_MODULES = frozenset({"pip", "pytest", "mypy", "black", "ruff", "isort", "flake8", "pylint", "pyflakes", "pycodestyle", "tox", "nox"})
PYTHON_MODULES_READ = frozenset({"json.tool", "tokenize", "tabnanny", "platform", "sysconfig", "this"})
PYTHON_MODULES_CODE = frozenset({"unittest", "doctest", "trace", "cProfile", "profile", "timeit", "pdb", "coverage"})

# What reaches the network. A program maps to the subcommands (one or two words) that do, or to
# None for "whatever it does". NETWORK_EXCEPT lists subcommands that stay local for programs
# that otherwise always go out. Builds that may fetch missing dependencies (cargo build, go
# build, mvn, uv run) are not listed: in the sandbox they fail offline with their own message,
# and the fetching step (cargo fetch, go mod download, npm ci, uv sync) is.
NETWORK: dict[str, frozenset[str] | None] = {
    **dict.fromkeys(
        words(
            "curl wget http https xh xhs httpie aria2c fetch nc ncat netcat socat ssh scp sftp ftp lftp tftp telnet mosh sshfs ping "
            "ping6 dig nslookup host whois traceroute tracepath mtr websocat grpcurl npx bunx pnpx uvx gh glab hub gcloud gsutil bq aws "
            "az kubectl oc terraform tofu helm pulumi vercel netlify fly flyctl heroku wrangler firebase doctl ansible ansible-playbook "
            "torsocks proxychains proxychains4 yt-dlp youtube-dl huggingface-cli hf svn sendmail mail mutt msmtp rclone s3cmd ngrok "
            "cloudflared tailscale git-lfs"
        ),
        None,
    ),
    "git": subcommands(
        "clone, fetch, pull, push, ls-remote, submodule update, submodule add, submodule sync, remote update, remote prune, "
        "remote show, fetch-pack, send-pack, send-email, request-pull, lfs fetch, lfs pull, lfs push, lfs clone, svn"
    ),
    "npm": subcommands(
        "install, i, in, ins, inst, insta, instal, isnt, isnta, isntal, isntall, add, ci, clean-install, install-clean, "
        "install-test, it, cit, update, up, upgrade, udpate, publish, unpublish, exec, x, create, init, view, v, info, show, "
        "outdated, audit, login, adduser, logout, search, s, se, find, dist-tag, deprecate, owner, access, ping, doctor, token, "
        "team, org, star, stars, whoami, repo, docs, bugs, sbom, dedupe, ddp, fund"
    ),
    "yarn": subcommands(
        "install, add, upgrade, up, upgrade-interactive, dlx, create, publish, npm, info, outdated, audit, login, import, global, set, why"
    )
    | {""},
    "pnpm": subcommands(
        "install, i, add, update, up, upgrade, dlx, create, publish, outdated, audit, fetch, install-test, it, import, dedupe, env, "
        "self-update, setup"
    ),
    "bun": subcommands("install, i, add, a, update, x, create, c, publish, upgrade, outdated, link, pm cache"),
    "pip": subcommands("install, download, search, index, wheel, lock"),
    "pip3": subcommands("install, download, search, index, wheel, lock"),
    "pipx": subcommands("install, run, upgrade, upgrade-all, inject, reinstall, reinstall-all, install-all"),
    "uv": subcommands(
        "pip install, pip compile, pip sync, pip download, sync, add, lock, tool install, tool run, tool upgrade, python install, "
        "publish, self update, build, init, venv, export, tree"
    ),
    "poetry": subcommands("install, add, lock, update, publish, search, self, source, new, init, show"),
    "pipenv": subcommands("install, sync, lock, update, upgrade, check, graph"),
    "pdm": subcommands("install, add, lock, update, sync, publish, self, outdated"),
    "conda": subcommands("install, create, update, upgrade, search, env create, env update"),
    "mamba": subcommands("install, create, update, upgrade, search, env create, env update"),
    "micromamba": subcommands("install, create, update, upgrade, search"),
    "cargo": subcommands(
        "install, fetch, update, publish, search, login, logout, add, generate-lockfile, yank, owner, vendor, binstall, info"
    ),
    "rustup": subcommands("update, install, toolchain install, target add, component add, self update, default, override set"),
    "go": subcommands("get, mod download, mod tidy, mod vendor, mod graph, mod why, install, work sync"),
    "gem": subcommands("install, i, update, push, fetch, search, sources, yank, owner, signin, outdated"),
    "bundle": subcommands("install, update, add, outdated, lock, package, cache, binstubs") | {""},
    "bundler": subcommands("install, update, add, outdated, lock, package, cache") | {""},
    "composer": subcommands(
        "install, i, update, u, upgrade, require, r, create-project, outdated, self-update, selfupdate, global, show, search"
    ),
    "apt": subcommands("install, update, upgrade, full-upgrade, dist-upgrade, download, source, build-dep, reinstall"),
    "apt-get": subcommands("install, update, upgrade, dist-upgrade, download, source, build-dep"),
    "aptitude": subcommands("install, update, upgrade, safe-upgrade, full-upgrade, download"),
    "dnf": subcommands("install, in, update, upgrade, up, makecache, download, reinstall, distro-sync"),
    "yum": subcommands("install, update, upgrade, makecache, reinstall, downgrade"),
    "zypper": subcommands("install, in, update, up, refresh, ref, dist-upgrade, dup, source-install, si"),
    "apk": subcommands("add, update, upgrade, fetch"),
    "brew": subcommands("install, update, upgrade, tap, fetch, reinstall, search, info, bundle, outdated, cask"),
    "port": subcommands("install, selfupdate, sync, upgrade"),
    "snap": subcommands("install, refresh, download, find, info"),
    "flatpak": subcommands("install, update, remote-add, search"),
    "nix": subcommands("build, shell, develop, run, profile, flake, search, copy"),
    "nix-shell": None,
    "nix-env": subcommands("-i, --install, -u, --upgrade"),
    "docker": subcommands(
        "pull, push, build, run, create, login, search, compose up, compose pull, compose build, compose run, compose push, "
        "compose create, buildx build, buildx bake, image pull, image push, image build, container run, container create, "
        "manifest push, manifest inspect, trust, plugin install"
    ),
    "podman": subcommands(
        "pull, push, build, run, create, login, search, compose up, compose pull, image pull, image push, image build, container run"
    ),
    "nerdctl": subcommands("pull, push, build, run, create, login, compose up"),
    "dotnet": subcommands("restore, add, tool install, tool update, nuget push, workload install, new install, publish"),
    "deno": subcommands("install, cache, add, upgrade, publish, outdated, compile"),
    "hg": subcommands("clone, pull, push, incoming, outgoing, in, out"),
    "ollama": subcommands("pull, push"),
    "openssl": subcommands("s_client, s_time, ocsp"),
    "mvn": subcommands("deploy, dependency:resolve, dependency:go-offline"),
}
NETWORK_EXCEPT: dict[str, frozenset[str]] = {
    "gcloud": subcommands("config, help, version, topic, components list"),
    "aws": subcommands("configure, help, --version"),
    "az": subcommands("config, --version, help"),
    "kubectl": subcommands("config, completion, kustomize, help, plugin"),
    "oc": subcommands("config, completion, help"),
    "terraform": subcommands("fmt, validate, version, -version, --version, -help, graph, console"),
    "tofu": subcommands("fmt, validate, version, -version, --version, -help, graph, console"),
    "helm": subcommands("lint, create, package, env, version, completion, template, help"),
    "gh": subcommands("--version, version, help, completion, config"),
    "pulumi": subcommands("version, about, help"),
    "svn": subcommands("status, st, add, revert, help, resolve, resolved, cleanup"),
}

NETWORK_SCHEMES = words("http:// https:// ftp:// ftps:// ssh:// git:// rsync:// ws:// wss:// sftp:// scp:// s3:// gs://")

# Variables that make the programs a line starts run other code: setting them is dangerous.
CODE_VARIABLES = names(
    "GIT_EXTERNAL_DIFF GIT_SSH GIT_SSH_COMMAND GIT_PAGER GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_ASKPASS GIT_EXEC_PATH GIT_TEMPLATE_DIR "
    "GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR GIT_PROXY_COMMAND GIT_ALLOW_PROTOCOL GIT_PROTOCOL_FROM_USER GIT_OBJECT_DIRECTORY "
    "GIT_ALTERNATE_OBJECT_DIRECTORIES SSH_ASKPASS SUDO_ASKPASS BASH_ENV ENV PROMPT_COMMAND PAGER MANPAGER SYSTEMD_PAGER EDITOR "
    "VISUAL SYSTEMD_EDITOR BROWSER LESSOPEN LESSCLOSE LESS LESSKEY LESSKEYIN MANOPT PERL5OPT PERL5LIB PERLLIB PERL5DB PYTHONSTARTUP "
    "PYTHONPATH PYTHONHOME PYTHONUSERBASE PYTHONWARNINGS PYTHONBREAKPOINT NODE_OPTIONS NODE_PATH RUBYOPT RUBYLIB SHELLOPTS BASHOPTS "
    "IFS PS4 PS0 ZDOTDIR JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS TAR_OPTIONS RSYNC_RSH RSYNC_CONNECT_PROG CVS_RSH "
    "RUSTC_WRAPPER RUSTC CARGO_BUILD_RUSTC_WRAPPER LUA_INIT LUA_PATH LUA_CPATH PHPRC PHP_INI_SCAN_DIR GCONV_PATH OPENSSL_CONF "
    "OPENSSL_ENGINES NPM_CONFIG_SCRIPT_SHELL npm_config_script_shell"
)
CODE_VARIABLE_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_")
# Variables that change where programs are found or configured: the programs a line names may
# then be the project's own (``PATH=.:$PATH ls``, ``HOME=. git status`` reads ./.gitconfig).
LOOKUP_VARIABLES = frozenset({"PATH", "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CONFIG_DIRS", "CDPATH", "GNUPGHOME", "SHELL"})
HARMLESS_GIT_VARIABLES = names(
    "GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_AUTHOR_DATE GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL GIT_COMMITTER_DATE GIT_TERMINAL_PROMPT "
    "GIT_OPTIONAL_LOCKS GIT_FLUSH GIT_MERGE_AUTOEDIT GIT_LITERAL_PATHSPECS GIT_GLOB_PATHSPECS GIT_NOGLOB_PATHSPECS "
    "GIT_ICASE_PATHSPECS GIT_NO_REPLACE_OBJECTS GIT_DEFAULT_HASH GIT_PROGRESS_DELAY GIT_REDIRECT_STDIN"
)

# git configuration keys (lower case; ``*`` spans a subsection) whose value git runs, or that
# let it run something (a transport, an include, a template with hooks).
GIT_CODE_KEYS = words(
    "core.fsmonitor core.sshcommand core.pager core.editor core.hookspath core.askpass core.gitproxy core.alternaterefscommand "
    "diff.external diff.*.command diff.*.textconv merge.*.driver filter.* credential.helper credential.*.helper protocol.* "
    "uploadpack.packobjectshook remote.*.uploadpack remote.*.receivepack remote.*.proxy remote.*.vcs gpg.program gpg.*.program "
    "sequence.editor pager.* interactive.difffilter web.browser browser.* man.* mergetool.* difftool.* sendemail.* include.path "
    "includeif.* init.templatedir safe.directory ssh.variant hook.* tar.*.command imap.tunnel submodule.*.update alias.*"
)


# Pagers and editors that only show or accept text: setting these is not running other code.
HARMLESS_PAGERS = frozenset({"cat", "less", "more", "head", "tail", "true", ":", "", "bat"})
PAGER_VARIABLES = frozenset(
    {"PAGER", "GIT_PAGER", "MANPAGER", "SYSTEMD_PAGER", "GIT_EDITOR", "EDITOR", "VISUAL", "GIT_SEQUENCE_EDITOR", "SYSTEMD_EDITOR"}
)
_PAGER_KEYS = ("core.pager", "pager.*", "core.editor", "sequence.editor")


def harmless_pager(value: str) -> bool:
    """``cat``, ``less -R``, ``true``: a pager or editor value that runs nothing else."""
    words = value.split()
    return (not words or words[0] in HARMLESS_PAGERS) and not set(value) & set(";|&$`()<>!+\\'\"")


def git_key_runs_code(key: str, value: str = "") -> bool:
    """Whether setting git ``key`` (to ``value``) lets git run a program."""
    key = key.lower()
    if any(fnmatch.fnmatchcase(key, pattern) for pattern in _PAGER_KEYS) and harmless_pager(value):
        return False
    if key.startswith("alias."):
        return value.lstrip().startswith("!") or "-c" in value.split() or "--exec-path" in value
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in GIT_CODE_KEYS)


def variable_runs_code(name: str, value: str = "") -> bool:
    """Whether setting ``name`` (to ``value``) makes programs run other code (LD_PRELOAD, GIT_SSH_COMMAND, PAGER ...)."""
    if name in PAGER_VARIABLES and harmless_pager(value) or name == "LESS" and not set(value) & set("+!|"):
        return False
    return name in CODE_VARIABLES or name.startswith(CODE_VARIABLE_PREFIXES)


def network_use(prog: str, words: list[str]) -> bool:
    """Whether ``prog`` with these non-option words reaches the network, by the tables above."""
    one = words[0] if words else ""
    two = " ".join(words[:2])
    if prog in NETWORK_EXCEPT:
        return bool(one) and one not in NETWORK_EXCEPT[prog] and two not in NETWORK_EXCEPT[prog]
    if prog not in NETWORK:
        return False
    subs = NETWORK[prog]
    return subs is None or one in subs or two in subs
