"""What each host costs per command and per file: local (without and inside the OS sandbox), Docker
(and any host added to ``HOSTS``).

For each host, on a temporary project: the median and p95 of ``run_command("true")`` (``--rounds``
times, after one warm-up command, which for Docker also starts the session's container: its time
is reported as ``first_command_ms``), side by side with a bare ``/bin/sh -c true`` spawned through
asyncio in the same rounds (interleaved; ``true_over_bare_ms`` is the difference of the medians:
what the host's path adds to a command), a 1 MB text file written and read back through the host's
file methods (the round trip the file tools make), and the same 1 MB read by a command
(``cat``: output streamed back from wherever the command runs). Hosts are measured in turn on the
same machine; Docker needs a running daemon and an image with ``/bin/sh`` (by default one built
offline from the system's static busybox, as the tests do).

``local-sandboxed`` is the local host with the project as the sandbox's confinement (bubblewrap
on Linux), as the agent runs a command it did not ask about. ``--code DIR`` measures another tree
of the repository (a ``git worktree`` of an older revision, for a before/after).

Prints JSON. Run: .venv/bin/python benchmarks/host_overhead.py [--rounds 50] [--hosts local,local-sandboxed,docker,ssh]
[--image IMAGE] [--ssh user@box:/dir] [--code DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.code_tree import use_code_tree

CODE = use_code_tree()

from core.config import ProjectConfig  # noqa: E402
from core.host.local import Host, LocalHost  # noqa: E402
from core.host.sandbox import Confinement  # noqa: E402

BUSYBOX_IMAGE = "hermes-editor-test-busybox:1"
MB = 1_000_000


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def summary(values: list[float]) -> dict:
    return {"median_ms": round(statistics.median(values), 2), "p95_ms": round(percentile(values, 0.95), 2)}


def busybox_image() -> str:
    """A ``FROM scratch`` image of /bin/busybox and its applets, built offline once."""
    import docker

    client = docker.from_env()
    try:
        try:
            client.images.get(BUSYBOX_IMAGE)
            return BUSYBOX_IMAGE
        except docker.errors.ImageNotFound:
            pass
        with tempfile.TemporaryDirectory() as context:
            shutil.copy2("/bin/busybox", Path(context) / "busybox")
            (Path(context) / "Dockerfile").write_text(
                'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n'
            )
            client.images.build(path=context, tag=BUSYBOX_IMAGE, network_mode="none", rm=True)
        return BUSYBOX_IMAGE
    finally:
        client.close()


def local_host(folder: Path, options: argparse.Namespace) -> Host:
    return LocalHost()


def docker_host(folder: Path, options: argparse.Namespace) -> Host:
    from core.host.docker import DockerHost

    image = options.image or busybox_image()
    return DockerHost("benchmark", ProjectConfig(path=str(folder), host="docker", image=image), secrets=[])


def ssh_host(folder: Path, options: argparse.Namespace) -> Host:
    """``--ssh user@box:/dir`` (the remote directory stands for the folder), else an SSH server on
    127.0.0.1 in this process (asyncssh's, as the tests use; commands run by /bin/sh as sshd runs
    them), whose remote directory is the folder itself."""
    from core.host.ssh import SshHost, SshTarget

    if options.ssh:
        return SshHost("benchmark", target=SshTarget.parse(options.ssh, port=options.ssh_port), local_root=folder)
    from tests.fakes.ssh_server import SshServer, known_hosts_line

    keys = Path(tempfile.mkdtemp(prefix="hermes-bench-ssh-"))
    server = SshServer(keys / "box", isolate=False)
    server.start_in_thread()
    known = keys / "known_hosts"
    known.write_text(known_hosts_line(server.port, server.host_key))
    identity = server.write_client_key(keys / "id")
    target = SshTarget.parse(f"bench@127.0.0.1:{folder}", port=server.port, identity_file=str(identity), known_hosts=str(known))
    return SshHost("benchmark", target=target, local_root=folder)


# Name -> factory of a host for a temporary project folder. Another host joins the comparison
# by adding its factory here (and its name to --hosts).
HOSTS: dict[str, Callable[[Path, argparse.Namespace], Host]] = {
    "local": local_host,
    "local-sandboxed": local_host,
    "docker": docker_host,
    "ssh": ssh_host,
}
# Hosts whose commands run with the project as their confinement (the OS sandbox).
SANDBOXED = {"local-sandboxed"}


async def _nothing(_content: Any) -> None:
    return None


async def timed(action: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = await action()
    return (time.perf_counter() - started) * 1000, value


async def bare_true(folder: Path) -> None:
    """``/bin/sh -c true`` spawned through asyncio with nothing around it: the reference."""
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", "true", cwd=str(folder), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE
    )
    await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"/bin/sh -c true failed: {proc.returncode}")


async def measure(name: str, options: argparse.Namespace) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"hermes-bench-{name}-")).resolve()
    folder.chmod(0o755)  # readable by a container's user when the folder's owner is root
    host = HOSTS[name](folder, options)
    confinement = Confinement((folder,)) if name in SANDBOXED else None
    try:

        async def command(text: str) -> Any:
            result = await host.run_command(text, folder, timeout=60, output_limit=2 * MB, show=_nothing, confinement=confinement)
            if result.exit_code != 0:
                raise RuntimeError(f"{name}: {text!r} failed: {result}")
            return result

        first_ms, _ = await timed(lambda: command("true"))
        await bare_true(folder)
        runs, bare = [], []
        for _ in range(options.rounds):
            runs.append((await timed(lambda: command("true")))[0])
            bare.append((await timed(lambda: bare_true(folder)))[0])
        text = ("x" * 99 + "\n") * (MB // 100)
        target = folder / "one-mb.txt"

        async def round_trip() -> None:
            await host.write_text(target, text)
            if (await host.read_file(target)).text != text:
                raise RuntimeError(f"{name}: the 1 MB file came back changed")

        files = [(await timed(round_trip))[0] for _ in range(max(options.rounds // 5, 1))]
        cats = [(await timed(lambda: command("cat one-mb.txt")))[0] for _ in range(max(options.rounds // 5, 1))]
        return {
            "first_command_ms": round(first_ms, 2),
            "true": summary(runs),
            "bare_true": summary(bare),
            "true_over_bare_ms": round(statistics.median(runs) - statistics.median(bare), 2),
            "file_1mb_write_read": summary(files),
            "cat_1mb": summary(cats),
        }
    finally:
        await host.aclose()
        shutil.rmtree(folder, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--hosts", default="local,local-sandboxed,docker,ssh", help=f"comma-separated, of: {', '.join(HOSTS)}")
    parser.add_argument("--image", default=None, help="the Docker image (default: a busybox image built offline)")
    parser.add_argument("--ssh", default=None, help="user@box:/dir for the ssh host (default: an SSH server on 127.0.0.1 in this process)")
    parser.add_argument("--ssh-port", type=int, default=None)
    parser.add_argument("--code", metavar="DIR", help="measure this tree of the repository instead (a worktree of another revision)")
    options = parser.parse_args()
    names = [n.strip() for n in options.hosts.split(",") if n.strip()]
    unknown = [n for n in names if n not in HOSTS]
    if unknown:
        parser.error(f"unknown host {', '.join(unknown)}; known: {', '.join(HOSTS)}")
    results = {name: await measure(name, options) for name in names}
    base = results.get("local", {}).get("true", {}).get("median_ms")
    for figures in results.values():
        if base:
            figures["true_over_local_ms"] = round(figures["true"]["median_ms"] - base, 2)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(json.dumps({"rounds": options.rounds, "cpus": os.cpu_count(), "load": load, "code": CODE, "hosts": results}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
