"""The OS sandbox under every command: what a mode lets run without a question runs here.

Linux: bubblewrap. The root file system is read-only; the project roots (and a private /tmp)
are writable; the paths that make something run later (``.git``, ``.vscode`` ...) are bound
read-only again inside the roots; credential stores and the state home are hidden; the command
gets its own PID namespace (``/proc`` shows no parent), no network unless granted, a clean
environment, and dies with its parent. macOS: a Seatbelt profile with the same policy.

An approval widens exactly what was asked for (``Grants``): the network, a path to write, or,
when the user said so, running outside the sandbox. Without a working sandbox the policy asks
for every command that does more than read (see ``core.policy.approvals``).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from core.paths import PROTECTED_NAMES, is_secret_path, within

__all__ = [
    "CREDENTIAL_STORES",
    "Confinement",
    "Grants",
    "SandboxStatus",
    "command_argv",
    "command_environment",
    "new_protected_paths",
    "own_session",
    "protected_entries",
    "seatbelt_profile",
    "status",
]

log = logging.getLogger(__name__)

# Under the user's home: where credentials live. Hidden inside the sandbox.
CREDENTIAL_STORES = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".azure",
    ".kube",
    ".docker",
    ".config/gh",
    ".config/hub",
    ".config/gcloud",
    ".config/git/credentials",
    ".config/op",
    ".config/rclone",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".yarnrc",
    ".pypirc",
    ".pgpass",
    ".my.cnf",
    ".password-store",
    ".local/share/keyrings",
    ".vault-token",
    ".terraform.d",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
    ".lesshst",
    ".wget-hsts",
    ".boto",
    ".s3cfg",
    ".dropbox",
    ".config/Code/User/globalStorage",
    ".claude",
    ".codex",
)
_SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/root/.ssh")
# Environment a sandboxed command keeps: the toolchains' own variables, never credentials.
_ENV_KEEP = {
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "COLORTERM",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "GOPATH",
    "GOROOT",
    "GOCACHE",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "JAVA_HOME",
    "NVM_DIR",
    "NVM_BIN",
    "NODE_PATH",
    "DENO_DIR",
    "BUN_INSTALL",
    "GEM_HOME",
    "GEM_PATH",
    "PNPM_HOME",
    "DOTNET_ROOT",
    "ANDROID_HOME",
    "CC",
    "CXX",
    "CFLAGS",
    "LDFLAGS",
    "PKG_CONFIG_PATH",
    "MANPATH",
    "CI",
}
_ENV_SET = {"PAGER": "cat", "GIT_PAGER": "cat", "NO_COLOR": "1", "TMPDIR": "/tmp"}
_PROBE_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Grants:
    """What an approval adds to the sandbox for one command."""

    network: bool = False
    writable: tuple[Path, ...] = ()
    unconfined: bool = False  # the user let it run outside the sandbox

    def describe(self) -> str:
        """What it widens, in words for the question ("" when nothing)."""
        if self.unconfined:
            return "run outside the sandbox, with full access to this machine"
        parts = []
        if self.network:
            parts.append("the network")
        if self.writable:
            parts.append("write access to " + ", ".join(str(p) for p in self.writable))
        return " and ".join(parts)

    def __bool__(self) -> bool:
        return self.network or bool(self.writable) or self.unconfined


@dataclass(frozen=True, slots=True)
class Confinement:
    """Everything a sandboxed command may do: the roots it writes, and what was granted."""

    roots: tuple[Path, ...]
    grants: Grants = field(default_factory=Grants)
    temp: Path | None = None  # the session's private /tmp; a fresh empty one when None
    # The roots bound read-only (a script that changes files only through the agent's tools).
    read_only: bool = False
    # Unix sockets it may connect to without the network (the agent's tool bridge).
    sockets: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """Which sandbox commands run in on this machine, or why none does."""

    name: str | None  # "bubblewrap", "seatbelt", or None
    detail: str

    @property
    def active(self) -> bool:
        return self.name is not None


def _disabled_by_config() -> str | None:
    if os.environ.get("HERMES_SANDBOX", "").lower() in ("0", "off", "false", "no"):
        return "turned off by HERMES_SANDBOX"
    try:
        from core.config import load_config

        if not load_config().sandbox.enabled:
            return "turned off in config.toml ([sandbox] enabled = false)"
    except Exception:  # a broken config is reported elsewhere; the sandbox stays on
        pass
    return None


@functools.cache
def status() -> SandboxStatus:
    """Probe once per process: a sandbox that is installed but cannot start counts as none."""
    if reason := _disabled_by_config():
        return SandboxStatus(None, reason)
    if sys.platform == "darwin":
        exe = shutil.which("sandbox-exec") or "/usr/bin/sandbox-exec"
        if not os.path.exists(exe):
            return SandboxStatus(None, "sandbox-exec is missing")
        argv = [exe, "-p", seatbelt_profile(Confinement((Path(tempfile.gettempdir()),))), "/usr/bin/true"]
        return _probe("seatbelt", argv)
    if not sys.platform.startswith("linux"):
        return SandboxStatus(None, f"no sandbox is supported on {sys.platform}")
    if _bwrap() is None:
        return SandboxStatus(None, "bubblewrap (bwrap) is not installed; install the bubblewrap package")
    with tempfile.TemporaryDirectory(prefix="hermes-probe-") as root:
        return _probe("bubblewrap", _bwrap_argv("true", Path(root), Confinement((Path(root),), temp=Path(root))))


def _probe(name: str, argv: list[str]) -> SandboxStatus:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxStatus(None, f"{name} could not start ({exc})")
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return SandboxStatus(None, f"{name} could not start ({why[-1] if why else f'exit {done.returncode}'})")
    return SandboxStatus(name, f"{name} ({argv[0]})")


def _bwrap() -> str | None:
    return _find_bwrap(os.environ.get("HERMES_BWRAP"), os.environ.get("PATH"))


@functools.lru_cache(maxsize=4)
def _find_bwrap(override: str | None, path: str | None) -> str | None:
    return override or shutil.which("bwrap", path=path)


def own_session(argv: list[str]) -> bool:
    """Whether ``argv`` (from ``command_argv``) starts the command in a session of its own
    (bubblewrap's ``--new-session``): whoever spawns it then only gives it its own process group."""
    i = 0
    if argv[:2] == ["/usr/bin/env", "-i"]:
        i = 2
        while i < len(argv) and "=" in argv[i]:  # env's own reading of its arguments
            i += 1
    bwrap = _bwrap()
    return bwrap is not None and argv[i : i + 2] == [bwrap, "--new-session"]


def command_argv(command: str, cwd: Path, confinement: Confinement | None, env: dict[str, str] | None = None) -> list[str]:
    """The argv that runs ``command``: inside the sandbox unless there is none or it was let out.

    ``env`` is the clean environment the sandboxed command gets (see ``command_environment``).
    Let out (``Grants.unconfined``) with bubblewrap present, it still gets its own PID namespace
    and dies with us, so nothing it starts outlives the session.
    """
    shell = ["/bin/sh", "-c", command]
    found = status()
    if confinement is None or not found.active:
        return shell
    if found.name == "seatbelt":
        if confinement.grants.unconfined:
            return shell
        pairs = [f"{k}={v}" for k, v in (env or {}).items()]
        return ["/usr/bin/env", "-i", *pairs, "/usr/bin/sandbox-exec", "-p", seatbelt_profile(confinement), *shell]
    if confinement.grants.unconfined:
        bwrap = _bwrap()
        assert bwrap is not None
        return [
            bwrap,
            "--new-session",
            "--dev-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--die-with-parent",
            "--chdir",
            str(cwd),
            *shell,
        ]
    return _bwrap_argv(command, cwd, confinement, env)


def command_environment(base: dict[str, str]) -> dict[str, str]:
    """The clean environment of a sandboxed command: toolchain variables, never credentials."""
    env = {k: v for k, v in base.items() if k in _ENV_KEEP or k.startswith("LC_")}
    env.update(_ENV_SET)
    return env


@functools.cache
def _configured_hidden() -> list[Path]:
    try:
        from core.config import load_config

        return [Path(os.path.expanduser(p)).resolve() for p in load_config().sandbox.hide]
    except Exception:
        return []


def _home() -> Path:
    return Path(os.path.expanduser("~")).resolve()


def _hidden_paths(confinement: Confinement) -> list[Path]:
    from core.config import home as state_home
    from core.state_home import main_home_path

    homes = [_home()]
    try:
        import pwd

        homes.append(Path(pwd.getpwuid(os.getuid()).pw_dir).resolve())
    except (ImportError, KeyError):
        pass
    paths = list(_fixed_hidden(tuple(homes), state_home(), tuple(_configured_hidden())))
    if (main := Path(main_home_path())) != state_home():
        # A profile's commands see neither the main home nor the other profiles in it (hidden after the
        # profile's own home: bubblewrap mounts over it in order).
        paths.append(main)
    # Secret files at the top of each root (.env, keys): the model reads them only when asked.
    for root in confinement.roots:
        try:
            with os.scandir(root) as it:
                paths += [Path(e.path) for e in it if _secret_name(e.name) and e.is_file()]
        except OSError:
            pass
    return paths


@functools.lru_cache(maxsize=4096)
def _secret_name(name: str) -> bool:
    """Whether a file of this name at the top of a root is hidden (the same names come back on
    every command, and judging one takes a few dozen patterns)."""
    return name.lower() != ".git" and is_secret_path(Path(name))


@functools.lru_cache(maxsize=8)
def _fixed_hidden(homes: tuple[Path, ...], state: Path, configured: tuple[Path, ...]) -> tuple[Path, ...]:
    """The paths hidden whatever the roots: credential stores under the homes, the system's
    secrets, the state home and the configured ones (built once; whether each exists is not)."""
    paths = [h / name for h in dict.fromkeys(homes) for name in CREDENTIAL_STORES]
    paths += [Path(p) for p in _SYSTEM_SECRETS]
    paths.append(state)
    paths += configured
    return tuple(paths)


def _entries(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as it:
            return [Path(e.path) for e in it]
    except OSError:
        return []


def protected_entries(roots: tuple[Path, ...] | list[Path]) -> list[Path]:
    """Protected paths (``.git``, ``.vscode`` ...) that exist at the top of the roots, any case."""
    found = []
    for root in roots:
        for entry in _entries(root):
            if entry.name.lower() == ".github":
                found += [e for e in _entries(entry) if e.name.lower() == "workflows"]
            elif entry.name.lower() in PROTECTED_NAMES:
                found.append(entry)
    return found


def new_protected_paths(roots: tuple[Path, ...] | list[Path], before: list[Path]) -> list[Path]:
    """Protected paths a command created in the roots (they were bound read-only if they existed)."""
    seen = {str(p).lower() for p in before}
    return [p for p in protected_entries(roots) if str(p).lower() not in seen]


def _visible(path: Path, writable: list[Path]) -> bool:
    """Whether ``path`` is still there inside the sandbox (the private /tmp hides the real one)."""
    return not within(path, [Path("/tmp")]) or within(path, writable)


def _bwrap_argv(command: str, cwd: Path, confinement: Confinement, env: dict[str, str] | None = None) -> list[str]:
    bwrap = _bwrap()
    assert bwrap is not None
    writable = [r for r in confinement.roots if r.exists()]
    granted = [p for p in confinement.grants.writable if p.exists()]
    argv = [bwrap, "--new-session", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not confinement.grants.network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # A private /tmp (and /run, where sockets of the desktop, docker and agents live).
    if confinement.temp is not None:
        argv += ["--bind", str(confinement.temp), "/tmp"]
    else:
        argv += ["--tmpfs", "/tmp"]
    if os.path.isdir("/run") and not os.path.islink("/run"):
        argv += ["--tmpfs", "/run"]
        if confinement.grants.network and os.path.isdir("/run/systemd/resolve"):
            argv += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]
    if os.path.isdir("/var/run") and not os.path.islink("/var/run"):
        argv += ["--tmpfs", "/var/run"]
    for path in writable:
        argv += ["--ro-bind" if confinement.read_only else "--bind", str(path), str(path)]
    for path in granted:
        argv += ["--bind", str(path), str(path)]
    visible = [*writable, *granted]
    # Bound again read-only inside the roots: what makes git, the editor or CI run code.
    for path in protected_entries(writable):
        if not within(path, granted):
            argv += ["--ro-bind", str(path), str(path)]
    for path in _hidden_paths(confinement):
        if not os.path.lexists(path) or not _visible(path, visible):
            continue
        if within(path, granted):
            continue
        if path.is_dir() and not path.is_symlink():
            argv += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    argv += ["--chdir", str(cwd), "/bin/sh", "-c", command]
    if env is not None:
        # bubblewrap is the command's parent inside: its own environment (/proc/1/environ) must
        # be the clean one too, so it is started through env -i rather than given --clearenv.
        argv = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv]
    return argv


def _sb_quote(path: Path | str) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _sb_regex(path: Path) -> str:
    special = set('.^$*+?()[]{}|\\"')
    return "".join("\\" + c if c in special else c for c in str(path))


def seatbelt_profile(confinement: Confinement) -> str:
    """A Seatbelt (sandbox-exec) profile with the bubblewrap policy: writes confined to the
    roots and temp, protected paths read-only (any case), credentials unreadable, no network."""
    temp_dirs = {Path("/private/tmp"), Path("/private/var/folders"), Path(tempfile.gettempdir()).resolve()}
    roots = [] if confinement.read_only else list(confinement.roots)
    writable = [*roots, *confinement.grants.writable, *temp_dirs]
    lines = ["(version 1)", "(allow default)"]
    if not confinement.grants.network:
        lines.append('(deny network* (remote ip "*:*") (remote unix-socket))')
        for socket in confinement.sockets:
            lines.append(f"(allow network-outbound (remote unix-socket (path-literal {_sb_quote(socket)})))")
    allowed = " ".join(f"(subpath {_sb_quote(p)})" for p in writable)
    lines.append(
        f'(deny file-write* (require-not (require-any {allowed} (literal "/dev/null") (literal "/dev/tty") (regex #"^/dev/fd/"))))'
    )
    for root in confinement.roots:
        names = "|".join(sorted(n.replace(".", "\\.") for n in PROTECTED_NAMES)) + "|\\.github/workflows"
        lines.append(f'(deny file-write* (regex #"(?i)^{_sb_regex(root)}/({names})(/|$)"))')
    hidden = [p for p in _hidden_paths(confinement) if not within(p, confinement.grants.writable)]
    for path in hidden:
        lines.append(f"(deny file-read* file-write* (subpath {_sb_quote(path)}))")
    return "\n".join(lines) + "\n"
