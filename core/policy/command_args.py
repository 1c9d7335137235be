"""What a program's arguments make it do: the files ``curl``/``wget``/``httpie`` send, the
options of ``tar`` and ``git`` that run programs or write, and shell globs as the shell would
expand them (``core.policy.command_code`` reads the programs carried in arguments: sed, awk, ``-c``).

Each inspector returns ``Effects`` (a level with its reason, the files written and read, the
network); ``core.policy.command_rules`` resolves the paths.
They only ever raise a grade.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.policy.command_tables import names

SAFE, NORMAL, DANGEROUS, HARD = 0, 1, 2, 3
# What this shell substitutes into a word that the line itself did not spell out.
_UNCHECKED = re.compile(r"\$\(|`|\$\{?(?!(?:HOME|PWD|USER|LOGNAME|TMPDIR|OLDPWD)\b)[A-Za-z_@*#?!0-9-]")
GLOB_LIMIT = 200  # matches of one pattern taken into account
_GLOB_BUDGET = 5000  # directory entries looked at for one pattern
_SCRIPT_LIMIT = 65536  # bytes of a sed/awk program file read to judge it


@dataclass(slots=True)
class Effects:
    level: int = SAFE
    reason: str = ""
    writes: list[str] = field(default_factory=list)  # words naming files, as the program sees them
    reads: list[str] = field(default_factory=list)
    network: bool = False
    programs: list[str] = field(default_factory=list)  # the words that hold its program (a sed script ...)

    def flag(self, level: int, reason: str) -> None:
        if level > self.level:
            self.level, self.reason = level, reason


def scan(
    args: list[str], values: frozenset[str] | set[str], attached: frozenset[str] | set[str] = frozenset(), *, permute: bool = True
) -> Iterator[tuple[str | None, str | None]]:
    """Options and operands the way getopt_long reads them: (option, value) and (None, operand).

    ``values`` take an argument (attached or the next word); ``attached`` take one only when it
    is attached (``-i.bak``, ``--in-place=.bak``). Without ``permute``, the first operand ends
    the options.
    """
    i, only_operands = 0, False
    while i < len(args):
        a = args[i]
        i += 1
        if only_operands or a == "-" or not a.startswith("-"):
            yield None, a
            only_operands = only_operands or not permute
            continue
        if a == "--":
            only_operands = True
            continue
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if eq:
                yield name, value
            elif name in values and i < len(args):
                yield name, args[i]
                i += 1
            else:
                yield name, None
            continue
        for j in range(1, len(a)):
            option, rest = "-" + a[j], a[j + 1 :]
            if option in attached:
                yield option, rest or None
                break
            if option in values:
                if rest:
                    yield option, rest
                elif i < len(args):
                    yield option, args[i]
                    i += 1
                else:
                    yield option, None
                break
            yield option, None


def unchecked(word: str) -> bool:
    """Whether the shell substitutes something into ``word`` (a parsed ``Word``) that the line did not spell out."""
    return bool(getattr(word, "expanded", False)) and bool(_UNCHECKED.search(word))


def read_small(path: Path | None) -> str | None:
    """The text of a small program file, or None when it is missing, large or unreadable."""
    if path is None:
        return None
    try:
        if os.path.getsize(path) > _SCRIPT_LIMIT:
            return None
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


# --- globs -------------------------------------------------------------------------------


def expand_glob(pattern: str, cwd: Path, home: Path, limit: int = GLOB_LIMIT) -> tuple[list[Path], bool]:
    """The paths a shell glob names now (links resolved), and whether there were more than ``limit``.

    Hidden names count when the pattern's component starts with ``.`` or uses ``?`` or ``[``
    (stricter than a shell, which is the safe side for reads).
    """
    pattern = home_pattern(pattern, home)
    if "$" in pattern or "`" in pattern or pattern.startswith("~"):
        return [], False
    current = [Path("/") if pattern.startswith("/") else cwd]
    parts = [p for p in pattern.split("/") if p]
    seen, truncated = 0, False
    for k, comp in enumerate(parts):
        found: list[Path] = []
        if not any(ch in comp for ch in "*?["):
            found = [d / comp for d in current if k == len(parts) - 1 or os.path.isdir(d / comp)]
        else:
            hidden = comp.startswith(".") or "?" in comp or "[" in comp
            for directory in current:
                try:
                    names = sorted(os.listdir(directory))
                except OSError:
                    continue
                seen += len(names)
                found += [directory / n for n in names if (hidden or not n.startswith(".")) and fnmatch.fnmatchcase(n, comp)]
                if seen > _GLOB_BUDGET:
                    truncated = True
                    break
        if len(found) > limit:
            found, truncated = found[:limit], True
        current = found
    return [Path(os.path.realpath(p)) for p in current if os.path.lexists(p)], truncated


def home_pattern(word: str, home: Path) -> str:
    """``word`` with a leading ``~``, ``$HOME`` or ``${HOME}`` replaced by the home directory."""
    for var in ("$HOME", "${HOME}", "~"):
        if word == var or word.startswith(var + "/"):
            return str(home) + word[len(var) :]
    return word


def static_prefix(pattern: str) -> str:
    """The directory part of a pattern before its first glob character or substitution."""
    cut = min((i for i, ch in enumerate(pattern) if ch in "*?[$`"), default=len(pattern))
    head = pattern[:cut]
    return head if head.endswith("/") or cut == len(pattern) else os.path.dirname(head) or "."


# --- network clients -----------------------------------------------------------------------

_CURL_VALUES = names(
    "-A -b -c -C -d -D -e -E -F -H -K -m -o -P -Q -r -t -T -u -U -w -x -X -y -Y -z --data --data-ascii --data-binary --data-raw "
    "--data-urlencode --json --form --form-string --upload-file --config --cert --key --cacert --capath --netrc-file --cookie "
    "--cookie-jar --output --dump-header --trace --trace-ascii --stderr --libcurl --header --proxy-header --variable --url-query "
    "--proxy-cert --proxy-key --proxy-cacert --output-dir --etag-save --etag-compare --hsts --alt-svc --url --user --user-agent "
    "--referer --request --proxy --max-time --connect-timeout --retry --retry-delay --retry-max-time --write-out --range --resolve "
    "--connect-to --interface --limit-rate --max-filesize --ciphers --pinnedpubkey --crlfile --unix-socket --abstract-unix-socket "
    "--doh-url --oauth2-bearer --aws-sigv4 --mail-from --mail-rcpt --mail-auth --quote --speed-limit --speed-time --time-cond "
    "--tls-max --preproxy --proxy-user --socks4 --socks5 --socks5-hostname --noproxy --dns-servers --local-port --create-file-mode "
    "--ftp-port --cert-type --key-type --pass --proto --proto-redir --proto-default --expect100-timeout --keepalive-time "
    "--parallel-max --service-name --login-options --max-redirs"
)
_CURL_READS = names("-T --upload-file -K --config --key --cacert --capath --netrc-file --proxy-key --proxy-cacert --crlfile --etag-compare")
_CURL_WRITES = names(
    "-o --output -D --dump-header -c --cookie-jar --trace --trace-ascii --stderr --libcurl --etag-save --hsts --alt-svc --output-dir"
)
_NAME_AT_FILE = re.compile(r"^%?([^=@]*)@(.+)$")


def curl_effects(args: list[str]) -> Effects:
    e = Effects(network=True)
    remote_name, urls = False, []
    for option, value in scan(args, _CURL_VALUES):
        if option is None:
            urls.append(value or "")
            if value and value.startswith("file://"):
                e.reads.append(value[len("file://") :])
            continue
        if option in ("-O", "--remote-name"):
            remote_name = True
        if value is None:
            continue
        if option in ("-d", "--data", "--data-ascii", "--data-binary", "--json", "-H", "--header", "--proxy-header"):
            if value.startswith("@") and value != "@-":
                e.reads.append(value[1:])
        elif option in ("--data-urlencode", "--url-query", "--variable"):
            if (m := _NAME_AT_FILE.match(value)) and "=" not in m.group(1) and m.group(2) != "-":
                e.reads.append(m.group(2))
        elif option in ("-F", "--form"):
            _, eq, rest = value.partition("=")
            if eq and rest[:1] in ("@", "<") and rest[1:2] != "-":
                e.reads.append(rest[1:].split(";")[0].strip('"'))
        elif option in ("-E", "--cert", "--proxy-cert"):
            e.reads.append(value.split(":")[0])
        elif option in ("-b", "--cookie") and "=" not in value or option in _CURL_READS and value not in ("-", "."):
            e.reads.append(value)
        elif option in _CURL_WRITES and value != "-":
            e.writes.append(value)
    if remote_name:
        e.writes += [
            os.path.basename(u.split("?")[0].rstrip("/")) for u in urls if "/" in u and os.path.basename(u.split("?")[0].rstrip("/"))
        ]
    return e


_WGET_VALUES = names(
    "-O -o -a -i -P -e -t -T -w -U -l -A -R -D -I -X -B -Q --output-document --output-file --append-output --input-file "
    "--directory-prefix --execute --post-file --body-file --post-data --body-data --load-cookies --save-cookies --certificate "
    "--private-key --ca-certificate --ca-directory --crl-file --config --user --password --header --method --user-agent --referer "
    "--warc-file --use-askpass --tries --timeout --wait --level --accept --reject --domains --base --quota --bind-address "
    "--limit-rate --rejected-log"
)


def wget_effects(args: list[str]) -> Effects:
    e = Effects(network=True)
    for option, value in scan(args, _WGET_VALUES):
        if option is None or value is None:
            continue
        if option in (
            "--post-file",
            "--body-file",
            "--load-cookies",
            "--certificate",
            "--private-key",
            "--ca-certificate",
            "--crl-file",
            "--config",
            "-i",
            "--input-file",
        ):
            if value != "-":
                e.reads.append(value)
        elif option in (
            "-O",
            "--output-document",
            "-o",
            "--output-file",
            "-a",
            "--append-output",
            "--save-cookies",
            "--rejected-log",
            "-P",
            "--directory-prefix",
        ):
            if value != "-":
                e.writes.append(value)
        elif option == "--warc-file":
            e.writes.append(value + ".warc.gz")
        elif option == "--use-askpass":
            e.flag(DANGEROUS, f"wget runs a program to ask for passwords ({value})")
        elif option in ("-e", "--execute"):
            e.flag(NORMAL, "wget runs configuration commands (-e)")
    return e


_HTTPIE_VALUES = names(
    "-a --auth -A --auth-type --session --session-read-only -o --output --cert --cert-key --cert-key-pass --verify --proxy --pretty "
    "-s --style -p --print --timeout --max-redirects --format-options --response-charset --response-mime --boundary --raw "
    "--default-scheme --ssl --ciphers"
)
_HTTPIE_ITEM = re.compile(r"^((?:\\.|[^=:@\\])*)(:=@|==@|=@|:@|@)(.+)$")


def httpie_effects(args: list[str]) -> Effects:
    e = Effects(network=True)
    positional = []
    for option, value in scan(args, _HTTPIE_VALUES):
        if option is None:
            positional.append(value or "")
        elif value is None:
            continue
        elif option in ("--session", "--session-read-only") and ("/" in value or value.endswith(".json")):
            e.reads.append(value)
            if option == "--session":
                e.writes.append(value)
        elif option in ("-o", "--output"):
            e.writes.append(value)
        elif option in ("--cert", "--cert-key") or option == "--verify" and value.lower() not in ("yes", "no", "true", "false"):
            e.reads.append(value)
    if positional and re.fullmatch(r"[A-Z]+", positional[0]):
        positional = positional[1:]
    for item in positional[1:]:
        if item.startswith("@"):
            e.reads.append(item[1:])
        elif m := _HTTPIE_ITEM.match(item):
            e.reads.append(m.group(3).split(";type=")[0])
    return e


# --- archives ----------------------------------------------------------------------------

_TAR_VALUES = names(
    "-f -C -I -F -T -X -g -K -N -b -H -L -V --file --directory --use-compress-program --info-script --new-volume-script --to-command "
    "--files-from --exclude-from --index-file --rsh-command --listed-incremental --format --label --owner --group --mode --mtime "
    "--exclude --transform --xform --checkpoint-action --warning --newer --suffix --starting-file --volno-file --rmt-command"
)
_TAR_RUNS = {"-I", "--use-compress-program", "-F", "--info-script", "--new-volume-script", "--to-command", "--rsh-command", "--rmt-command"}


def tar_effects(args: list[str]) -> Effects:
    """What tar does: list (reads), create (writes the archive) or extract (writes a directory)."""
    if args and not args[0].startswith("-"):
        args = ["-" + args[0], *args[1:]]  # old style: `tar xzf a.tgz`
    e = Effects()
    create = extract = listing = False
    archive, directory = None, "."
    for option, value in scan(args, _TAR_VALUES):
        if option in ("-c", "--create", "-r", "--append", "-u", "--update", "-A", "--catenate", "--concatenate", "--delete"):
            create = True
        elif option in ("-x", "--extract", "--get"):
            extract = True
        elif option in ("-t", "--list", "-d", "--diff", "--compare"):
            listing = True
        elif option in ("-f", "--file") and value:
            archive = value
            if ":" in value.split("/")[0] and "--force-local" not in args:
                e.network = True
        elif option in ("-C", "--directory") and value:
            directory = value
        elif option in _TAR_RUNS:
            e.flag(DANGEROUS, f"tar runs a program ({option} {value or ''})".replace(" )", ")"))
        elif option == "--checkpoint-action" and (value or "").startswith("exec"):
            e.flag(DANGEROUS, "tar runs a program at checkpoints (--checkpoint-action=exec)")
        elif option in ("-T", "--files-from", "-X", "--exclude-from") and value and value != "-":
            e.reads.append(value)
        elif option in ("--index-file", "-g", "--listed-incremental", "--volno-file") and value:
            e.writes.append(value)
    if create and archive and archive != "-":
        e.writes.append(archive)
    if extract:
        e.writes.append(directory)
    elif archive and archive != "-":
        e.reads.append(archive)
    if create or extract or not listing:
        e.flag(NORMAL, "tar writes files")
    return e


# --- git -----------------------------------------------------------------------------------

GIT_GLOBAL_VALUES = names("-C -c --git-dir --work-tree --namespace --config-env --super-prefix --attr-source --list-cmds")


def git_globals(args: list[str]) -> tuple[list[tuple[str, str]], list[str], list[str], list[str]]:
    """Git's global options: (-c settings as (key, value), -C directories, --git-dir/--exec-path used, the rest)."""
    settings: list[tuple[str, str]] = []
    dirs: list[str] = []
    special: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, eq, value = args[i].partition("=")
        takes = name in GIT_GLOBAL_VALUES and not eq
        if takes:
            value = args[i + 1] if i + 1 < len(args) else ""
        i += 2 if takes else 1
        if name == "-c":
            key, _, val = value.partition("=")
            settings.append((key, val))
        elif name == "--config-env":
            key, _, env = value.partition("=")
            settings.append((key, "$" + env))
        elif name == "-C":
            dirs.append(value)
        elif name == "--git-dir" or name == "--exec-path" and eq:
            special.append(name)
    return settings, dirs, special, args[i:]


def git_config_file(start: Path) -> Path:
    """The configuration file of the repository ``start`` lies in (``.git/config``, worktrees followed)."""
    for directory in (start, *start.parents):
        dot = directory / ".git"
        if dot.is_dir():
            return Path(os.path.realpath(dot / "config"))
        if dot.is_file():
            text = read_small(dot) or ""
            gitdir = text.partition("gitdir:")[2].strip()
            if gitdir:
                gitdir_path = Path(os.path.realpath(directory / gitdir))
                common = (read_small(gitdir_path / "commondir") or "").strip()
                return Path(os.path.realpath(gitdir_path / common / "config")) if common else gitdir_path / "config"
    return start / ".git" / "config"
