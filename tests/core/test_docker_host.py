"""The Docker host against a real daemon: commands run in the session's container (its busybox
userland, its hostname, no network, a read-only root, the project folder owner's uid), with
output, exit codes, timeouts, background jobs, stop and cancel as on this machine; clear errors
for a missing image, an unreachable daemon and a folder outside the container; the container
goes when the host closes, unless it is kept.
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from core.config import ProjectConfig
from core.host.docker import DockerHost, DockerUnavailable
from tests.docker_support import busybox_image, containers_of, docker_client

UID = 1234


async def _show(_content) -> None:
    return None


@pytest.fixture
def project(tmp_path) -> Path:
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello from the project\n")
    os.chown(folder, UID, UID)
    return folder


@pytest.fixture
def image() -> str:
    return busybox_image()


def _host(project: Path, image: str, name: str = "app", **fields) -> DockerHost:
    return DockerHost(name, ProjectConfig(path=str(project), host="docker", image=image, **fields), secrets=["sk-docker-canary-5150"])


async def run(host: DockerHost, command: str, cwd: Path, timeout: float = 30):
    return await host.run_command(command, cwd, timeout=timeout, output_limit=20_000, show=_show)


async def test_commands_run_in_the_container(project, image, monkeypatch):
    monkeypatch.setenv("HERMES_DOCKER_CANARY", "sk-docker-canary-5150")
    host = _host(project, image)
    try:
        result = await run(
            host,
            "cat notes.txt; id -u; hostname; readlink /bin/ls; env; echo late >&2; touch /root-file; touch made-here; exit 7",
            project,
        )
        assert result.exit_code == 7 and not result.timed_out
        lines = result.output.splitlines()
        assert lines[0] == "hello from the project" and lines[1] == str(UID)
        assert lines[2] != socket.gethostname() and lines[2] == host.container_id[:12]
        assert lines[3] == "/bin/busybox"  # the image's userland, not this machine's
        assert "sk-docker-canary-5150" not in result.output and "HERMES_DOCKER_CANARY" not in result.output
        assert "Read-only file system" in result.output and result.output.rstrip().endswith("Read-only file system")
        assert "late" in result.output
        assert (project / "made-here").stat().st_uid == UID  # written through the mount, as the folder's owner
        first = host.container_id
        again = await run(host, "ls /sys/class/net", project)
        assert host.container_id == first  # one container for the session
        assert again.output.split() == ["lo"]  # no network but loopback
    finally:
        await host.aclose()
    assert containers_of("app") == []


async def test_timeout_background_job_and_stop(project, image):
    host = _host(project, image)
    try:
        result = await run(host, "echo started; sleep 60", project, timeout=1)
        assert result.timed_out and result.signal == "SIGTERM" and "started" in result.output
        job = await host.start_command(
            "i=0; while [ $i -lt 3 ]; do i=$((i+1)); echo tick $i; sleep 0.3; done; exec sleep 60", project, output_limit=10_000, show=_show
        )
        assert host.jobs[job.id] is job
        seen = ""
        for _ in range(40):
            text, ended = await job.read(wait=1)
            seen += text
            assert ended is None
            if "tick 3" in seen:
                break
        assert "tick 1\ntick 2\ntick 3" in seen
        stopped = await job.stop()
        assert stopped.signal == "SIGTERM" and job.ended is not None
        left = await run(host, "ps -o args | grep -c '[s]leep 60' || true", project)
        assert left.output.strip() == "0"  # the group went, the sleeper included
        short = await host.start_command("echo done; exit 3", project, output_limit=10_000, show=_show)
        seen = ""
        for _ in range(50):
            text, ended = await short.read(wait=0.5)
            seen += text
            if ended is not None:
                break
        assert ended is not None and ended.exit_code == 3 and "done" in seen
    finally:
        await host.aclose()


async def test_cancel_ends_the_command_in_the_container(project, image):
    host = _host(project, image)
    try:
        task = asyncio.ensure_future(run(host, "echo $$ > pid; exec sleep 120", project, timeout=300))
        for _ in range(100):
            if (project / "pid").exists() and (project / "pid").read_text().strip():
                break
            await asyncio.sleep(0.1)
        pid = (project / "pid").read_text().strip()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(50):
            alive = await run(host, f"kill -0 {pid} 2>/dev/null && echo alive || echo gone", project)
            if alive.output.strip() == "gone":
                break
            await asyncio.sleep(0.1)
        assert alive.output.strip() == "gone"
    finally:
        await host.aclose()


async def test_missing_image_is_named_with_the_fix(project):
    host = _host(project, "hermes-editor-no-such-image:0", name="ghost")
    with pytest.raises(DockerUnavailable) as info:
        await run(host, "true", project)
    message = str(info.value)
    assert "hermes-editor-no-such-image:0" in message and "docker build" in message and "[projects.ghost] image" in message
    await host.aclose()


async def test_unreachable_daemon_is_named_with_the_fix(project, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    host = _host(project, "whatever:1")
    with pytest.raises(DockerUnavailable) as info:
        await run(host, "true", project)
    message = str(info.value)
    assert f"not reachable at unix://{tmp_path}/no-docker.sock" in message and "dockerd" in message and "DOCKER_HOST" in message
    await host.aclose()


async def test_a_folder_outside_the_container_is_refused(project, image, tmp_path):
    host = _host(project, image)
    with pytest.raises(DockerUnavailable, match="is not in the container"):
        await run(host, "true", tmp_path)
    assert host.container_id is None
    await host.aclose()


async def test_kept_container_stays_stopped_and_mounts_and_limits_apply(project, image, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "fixture.txt").write_text("shared\n")
    host = _host(project, image, name="kept", keep=True, mounts=[f"{data}:/data:ro"], memory="64m", pids=50, cpus=0.5)
    try:
        result = await run(host, "cat /data/fixture.txt; touch /data/x 2>&1 | grep -c Read-only", project)
        assert result.output.splitlines() == ["shared", "1"]
        client = docker_client()
        attrs = client.api.inspect_container(host.container_id)
        limits = attrs["HostConfig"]
        assert limits["Memory"] == 64 * 1024 * 1024 and limits["PidsLimit"] == 50 and limits["NanoCpus"] == 500_000_000
        assert limits["ReadonlyRootfs"] and limits["CapDrop"] == ["ALL"] and "no-new-privileges" in limits["SecurityOpt"][0]
        assert limits["NetworkMode"] == "none"
    finally:
        await host.aclose()
    kept = containers_of("kept")
    try:
        assert len(kept) == 1 and kept[0].status == "exited"
    finally:
        for container in kept:
            container.remove(force=True)
        client.close()


async def test_protected_paths_are_read_only_and_secret_files_hidden(project, image):
    (project / ".git" / "hooks").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n")
    (project / ".env").write_text("API_KEY=sk-docker-canary-5150\n")
    for path in (project / ".git", project / ".git" / "hooks"):
        os.chown(path, UID, UID)
    host = _host(project, image)
    try:
        result = await run(
            host, "echo x > .git/hooks/post-checkout 2>&1; echo rc=$?; cat .env; echo end; echo fine > src.txt; cat src.txt", project
        )
        assert "rc=1" in result.output and "Read-only file system" in result.output
        assert "sk-docker-canary-5150" not in result.output and "fine" in result.output
        assert not (project / ".git" / "hooks" / "post-checkout").exists()
        assert (project / ".env").read_text() == "API_KEY=sk-docker-canary-5150\n"
    finally:
        await host.aclose()


async def test_output_is_shown_while_the_command_runs(project, image):
    host = _host(project, image)
    shown: list[str] = []

    async def show(content) -> None:
        shown.extend(item.text for item in content)

    try:
        running = asyncio.ensure_future(
            host.run_command(
                "echo first; until [ -f go ]; do sleep 0.05; done; echo second", project, timeout=60, output_limit=10_000, show=show
            )
        )
        for _ in range(300):
            if any("first" in text for text in shown):
                break
            await asyncio.sleep(0.05)
        assert shown and "first" in shown[-1] and "second" not in shown[-1] and not running.done()
        (project / "go").touch()
        result = await running
        assert result.exit_code == 0 and result.output == "first\nsecond\n"
    finally:
        await host.aclose()
