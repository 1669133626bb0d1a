"""The container image test's machinery: a local base image (no registry is reachable), the image, its containers.

podman runs with runc (crun refuses this machine's cgroups) and explicit ulimits (without them the runtime's
setrlimit is refused), host networking (the containers reach the tests' PostgreSQL and broker on 127.0.0.1).
The base is Debian bookworm's minimal system with python3, made by debootstrap once and kept, with a lock, in a
cache folder of the tests' own: several test runs at once build it once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "deploy" / "container" / "build-image"

# the flags every podman call of the tests needs on this machine
PODMAN = ("podman", "--runtime", "runc")
LIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")
BASE_IMAGE = "localhost/pin-test-base:bookworm"
SUITE = "bookworm"
BASE_PACKAGES = "python3,python3-venv,ca-certificates"


def cache_folder() -> Path:
    """The tests' own cache (outside the checkout, kept between runs)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = root / "pin-tests" / "container"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(*args: str, timeout: float = 900, **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{' '.join(args)} exited {result.returncode}: {result.stderr[-3000:]}"
    return result  # type: ignore[no-any-return]


def _image_exists(name: str) -> bool:
    return subprocess.run([*PODMAN, "image", "exists", name], check=False, timeout=60).returncode == 0


def base_image() -> str:
    """The local base image (Debian bookworm minbase with python3), made once: the root file system's tarball is
    cached too, so a podman store that was reset only imports it again."""
    folder = cache_folder()
    with _locked(folder / "base.lock"):
        if _image_exists(BASE_IMAGE):
            return BASE_IMAGE
        tarball = folder / f"{SUITE}-minbase.tar"
        if not tarball.exists():
            target = folder / f"rootfs-{uuid.uuid4().hex[:8]}"
            try:
                _run("debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", SUITE, str(target))
                partial = tarball.with_suffix(".partial")
                _run("tar", "-C", str(target), "-cf", str(partial), ".")
                partial.rename(tarball)  # whole or absent
            finally:
                shutil.rmtree(target, ignore_errors=True)
        with tarball.open("rb") as data:
            _run(*PODMAN, "import", "-", BASE_IMAGE, stdin=data)
    return BASE_IMAGE


def build_image(tag: str) -> None:
    """deploy/container/build-image on the local base, as a user builds it with podman."""
    _run(
        str(BUILD_SCRIPT),
        tag,
        "--layers=false",  # no cached stage left behind per run (the project's wheel changes every commit anyway)
        "--network",
        "host",
        *LIMITS,
        "--build-arg",
        f"BASE={base_image()}",
        env={**os.environ, "CONTAINER_ENGINE": " ".join(PODMAN)},
        timeout=1800,
    )


def remove_image(tag: str) -> None:
    """Remove the image (its layers stay cached while other tags use them)."""
    subprocess.run([*PODMAN, "rmi", "--force", tag], capture_output=True, check=False, timeout=120)


def run_args(image: str, name: str, env: dict[str, str], *command: str) -> list[str]:
    """The podman command that runs ``command`` of the image in a container ``name`` on the host's network, with a
    read-only root file system (and podman's tmpfs on /tmp) as the Kubernetes manifests run it."""
    variables = [item for key, value in env.items() for item in ("--env", f"{key}={value}")]
    network = ("--network", "host", "--read-only")
    return [*PODMAN, "run", "--rm", "--name", name, *network, *LIMITS, *variables, image, *command]


def remove_container(name: str) -> None:
    """Stop and remove a container if it still exists (a test that failed midway)."""
    subprocess.run([*PODMAN, "rm", "--force", "--time", "5", name], capture_output=True, check=False, timeout=60)
