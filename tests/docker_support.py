"""A Docker daemon for tests, and a small image built offline from the system's static busybox.

No registry is reachable where the tests run: the image is ``FROM scratch`` with
``/bin/busybox`` (Debian's ``busybox-static``) and its applets. Without a daemon or busybox the
tests fail, saying what to install (``.ci/run`` installs both and starts ``dockerd``).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

IMAGE = "hermes-editor-test-busybox:1"
_DOCKERFILE = """FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
"""


def docker_client():
    """A client of the daemon, or a failed test naming the fix."""
    import docker

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"these tests need a running Docker daemon ({exc}); install docker.io and start dockerd (.ci/run does both)")
    return client


def busybox_image() -> str:
    """The test image's tag, built on first use."""
    import docker

    client = docker_client()
    try:
        try:
            client.images.get(IMAGE)
            return IMAGE
        except docker.errors.ImageNotFound:
            pass
        busybox = Path("/bin/busybox")
        if not busybox.exists():
            pytest.fail("these tests need a static /bin/busybox for their image: apt-get install busybox-static")
        with tempfile.TemporaryDirectory() as context:
            shutil.copy2(busybox, Path(context) / "busybox")
            (Path(context) / "Dockerfile").write_text(_DOCKERFILE)
            client.images.build(path=context, tag=IMAGE, network_mode="none", rm=True)
        return IMAGE
    finally:
        client.close()


def containers_of(project: str) -> list:
    """Containers (running or not) of a project's sessions."""
    client = docker_client()
    try:
        return client.containers.list(all=True, filters={"label": f"org.hermes-editor={project}"})
    finally:
        client.close()
