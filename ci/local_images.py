"""Do the images build, and do their commands run, on a machine with no docker and no GPU?

The project's Dockerfiles (docker/*.Dockerfile) built with buildah from a stand-in base made
here, and the compose file's services (docker/compose.yaml) run from them as compose would,
with ``buildah run --isolation chroot``. Standard library and PyYAML; run it with the
project's venv (``ci/local-images.sh`` does)::

    ci/local-images.sh base [cuda rocm dind-nvidia]   # the stand-in bases (cached by content)
    ci/local-images.sh build [cuda rocm dind-nvidia]  # vlmpath:cuda, vlmpath:rocm, ...
    ci/local-images.sh run bench-cuda info            # compose's service, its entrypoint
    ci/local-images.sh images                         # what is in buildah's store
    ci/local-images.sh clean [--bases]                # remove them

**Stand-in bases.** No registry is reachable, so each Dockerfile's base (its ``ARG
BASE_IMAGE`` default) is stood in for by an image made here: a Debian (or, for
``ubuntu:*``, Ubuntu) root filesystem from ``debootstrap``, committed into buildah's store,
and for the PyTorch bases docker/standin/Containerfile on top (python at the vendor base's
location, pip, the CPU torch 2.13.0 wheel checked by hash, torch's requirements from
docker/standin/torch.lock). Each is tagged by a key over its inputs (the recipe, the
package list, the wheel's sha256, the lock), so a second run finds it and reuses it; a
changed input makes a new one. ``STANDINS`` says what each stands in for. Where the host
reaches the index through an intercepting proxy, a thin layer more trusts the host's CA
bundle (``with_host_ca``): a stand-in's difference from the real base, said in the docs.

**Builds.** ``buildah bud --isolation chroot --network host --layers --format docker``
(buildah's OCI default drops SHELL) with the stand-in as ``--build-arg BASE_IMAGE`` and the
compose service's build args; tagged ``localhost/vlmpath:<name>`` (``buildah images`` lists
them, with the storage driver this script used: ``buildah info``). ``--no-cache`` rebuilds
every step (the e2e test does, for the CUDA image: the base is what is cached). The dind image needs the
Docker and NVIDIA apt repositories, which this machine cannot reach: its build is tried,
and when it fails at one of those hosts, the Dockerfile without the vendor steps is built
as ``vlmpath:dind-nvidia-novendor`` instead (``BuildResult.cannot`` says what is missing).

**Runs.** A service of docker/compose.yaml is read from the file itself (its image,
entrypoint, command, working_dir, environment, volumes, ulimits, healthcheck), with
compose's ``${VAR:-default}`` interpolation; the bind mounts are resolved against the
compose file's directory, named volumes are host directories (seeded from the image's
content at their target on first use, as a fresh Docker volume is). What a chroot cannot
do and this script does not pretend to: GPU device reservations, device nodes and groups
(``deploy``, ``devices``, ``group_add``, ``cap_add``, ``security_opt``), a published host
port (a run with ``network=private`` gets its own network namespace, where the service
answers on its own loopback). ``ServiceRun.not_exercised`` names them for each run.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
STANDIN_DIR = DOCKER / "standin"
COMPOSE = DOCKER / "compose.yaml"
# Bump when the way a stand-in is made changes in a way its inputs do not show.
RECIPE_VERSION = 1
HOME = Path(os.environ.get("VLMPATH_LOCAL_IMAGES_HOME",
                           Path.home() / ".cache" / "vlmpath" / "local-images"))
CPU_TORCH = os.environ.get("VLMPATH_CPU_TORCH", "torch==2.13.0")
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
IMAGE_REPO = "localhost/vlmpath"
STANDIN_REPO = "localhost/vlmpath-standin"
ROOTFS_REPO = "localhost/vlmpath-standin-rootfs"
# Hosts of the vendors' apt repositories (docker/dind-nvidia.Dockerfile): not reachable
# from this machine; a step that needs them is what the dind build cannot do here.
VENDOR_HOSTS = ("download.docker.com", "nvidia.github.io")
VENDOR_STEP_MARKERS = (*VENDOR_HOSTS, "nvidia-ctk", "docker-ce")
# Compose keys a chroot run cannot honour: what each would need.
NOT_EXERCISED = {
    "deploy": "GPU device reservations (the NVIDIA Container Toolkit and a GPU)",
    "devices": "the host's device nodes (/dev/kfd, /dev/dri: an AMD GPU)",
    "group_add": "supplementary groups for the GPU device nodes",
    "cap_add": "extra capabilities (a container runtime)",
    "security_opt": "a seccomp profile (a container runtime)",
    "ports": "a published host port (a container runtime's port mapping)",
}


class ImagesError(Exception):
    """A clear one-line failure: what went wrong and what to do."""


def say(msg: str) -> None:
    print(f"local-images: {msg}", file=sys.stderr, flush=True)


# --- buildah -----------------------------------------------------------------------------
def buildah_cmd() -> list[str]:
    exe = shutil.which("buildah")
    if exe is None:
        raise ImagesError("buildah is not installed: apt-get install buildah debootstrap "
                          "(ci/setup.sh does, as root)")
    cmd = [exe]
    driver = os.environ.get("VLMPATH_BUILDAH_STORAGE_DRIVER")
    if driver:
        cmd += ["--storage-driver", driver]
    return cmd


def buildah(*args: str, capture: bool = True, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([*buildah_cmd(), *args], capture_output=capture, text=True)
    if check and r.returncode != 0:
        err = (r.stderr or "").strip().splitlines()
        raise ImagesError(f"buildah {' '.join(args[:2])} failed ({r.returncode}): {err[-1] if err else ''}")
    return r


def storage_driver() -> str:
    info = json.loads(buildah("info").stdout)
    return info["store"]["GraphDriverName"]


def image_exists(ref: str) -> bool:
    return buildah("inspect", "--type", "image", ref, check=False).returncode == 0


def image_config(ref: str) -> dict:
    data = json.loads(buildah("inspect", "--type", "image", ref).stdout)
    return data["OCIv1"]["config"]


_UNITS = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def _bytes(size: object) -> int:
    """buildah's size, a number or its human form ("1.66 GB", decimal units)."""
    if isinstance(size, (int, float)):
        return int(size)
    m = re.fullmatch(r"\s*([\d.]+)\s*([kKMGT]?B)\s*", str(size))
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else 0


def image_size(ref: str) -> int:
    """Bytes of the image's layers, uncompressed (what ``buildah images`` shows)."""
    for row in json.loads(buildah("images", "--json", ref).stdout or "[]"):
        return _bytes(row.get("size", 0))
    return 0


@contextlib.contextmanager
def store_lock() -> Iterator[None]:
    """One maker of stand-ins at a time (two would debootstrap the same base twice)."""
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- stand-in bases ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Rootfs:
    """A distribution root filesystem from debootstrap (--variant=minbase)."""

    name: str
    suite: str
    mirror: str
    include: tuple[str, ...] = ()
    # debootstrap's script for the suite when it has none of its own name (an older
    # debootstrap than the suite: Ubuntu's scripts differ little release to release).
    script: str | None = None

    def key(self) -> str:
        return _key(RECIPE_VERSION, dataclasses.asdict(self))

    def ref(self) -> str:
        return f"{ROOTFS_REPO}:{self.name}-{self.key()}"


DEBIAN = Rootfs("debian-bookworm", "bookworm", "http://deb.debian.org/debian", include=("python3-venv",))
UBUNTU = Rootfs("ubuntu-noble", "noble", "http://archive.ubuntu.com/ubuntu", script="jammy")


@dataclasses.dataclass(frozen=True)
class Standin:
    """What stands in here for one vendor base image, and what it cannot stand in for."""

    flavor: str
    rootfs: Rootfs
    py_prefix: str | None  # None: no python, no torch (a plain distribution image)
    stands_for: str
    cannot: str

    def key(self, wheel_sha: str | None, lock_text: str | None) -> str:
        containerfile = (STANDIN_DIR / "Containerfile").read_text(encoding="utf-8") if self.py_prefix else None
        return _key(RECIPE_VERSION, self.rootfs.key(), self.flavor, self.py_prefix, containerfile,
                    wheel_sha, lock_text)


# Keyed by the repository of the Dockerfile's ARG BASE_IMAGE default (docker/base-images.lock).
STANDINS = {
    "pytorch/pytorch": Standin(
        "conda", DEBIAN, "/opt/conda",
        "pytorch/pytorch: python first on PATH at /opt/conda/bin, pip, torch installed by the "
        "base and owned by root",
        "the CUDA runtime and cuDNN, the NVIDIA driver (the Container Toolkit's), the CUDA torch "
        "build (torch.version.cuda is None here), conda itself (/opt/conda is a venv over "
        "Debian's python 3.11), Ubuntu 22.04"),
    "rocm/pytorch": Standin(
        "venv", DEBIAN, "/opt/venv",
        "rocm/pytorch: python in a venv at /opt/venv first on PATH, pip, torch installed by the "
        "base and owned by root",
        "ROCm (/opt/rocm, HIP), the amdgpu driver and /dev/kfd, the ROCm torch build "
        "(torch.version.hip is None here), python 3.12 (3.11 here: the local torch wheel is "
        "cp311), Ubuntu 24.04"),
    "ubuntu": Standin(
        "ubuntu", UBUNTU, None,
        "ubuntu:24.04: Ubuntu noble's minimal base system (debootstrap --variant=minbase)",
        "nothing of ubuntu:24.04 that the Dockerfile uses; what the dind build cannot do here is "
        "reach the Docker and NVIDIA apt repositories"),
}


def base_default(dockerfile: Path) -> str:
    """The Dockerfile's ``ARG BASE_IMAGE=`` default (the lock's TAG, or TAG@DIGEST)."""
    for line in dockerfile.read_text(encoding="utf-8").splitlines():
        if line.startswith("ARG BASE_IMAGE="):
            return line.split("=", 1)[1].strip()
    raise ImagesError(f"{dockerfile} has no 'ARG BASE_IMAGE=' line: the stand-in base is passed as that build arg")


def standin_for(dockerfile: Path) -> Standin:
    ref = base_default(dockerfile).split("@", 1)[0]
    repo = ref.rsplit(":", 1)[0]
    try:
        return STANDINS[repo]
    except KeyError:
        raise ImagesError(f"{dockerfile}: no stand-in for base image {ref!r}: add one to STANDINS "
                          f"in ci/local_images.py (known: {', '.join(sorted(STANDINS))})") from None


def torch_wheel() -> Path:
    """The CPU torch wheel for the stand-ins, as ci/setup.sh finds it (local, else the CPU index)."""
    dest = HOME / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    for found in sorted(dest.glob("torch-*.whl")):
        if CPU_TORCH.split("==", 1)[1] in found.name:
            return found
    base = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
            "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
            "--platform", "manylinux_2_28_x86_64", "-d", str(dest)]
    index = os.environ.get("VLMPATH_TORCH_INDEX", "")
    tries = [["--no-index", CPU_TORCH]] if index in ("", "local") else []
    if index != "local":
        tries.append(["--index-url", index or CPU_INDEX, CPU_TORCH])
    for args in tries:
        if subprocess.run([*base, *args], capture_output=True, text=True).returncode == 0:
            wheels = sorted(dest.glob("torch-*.whl"))
            if wheels:
                return wheels[-1]
    raise ImagesError(f"no {CPU_TORCH} CPU wheel: put it where pip's find-links point, or set "
                      f"VLMPATH_TORCH_INDEX to a CPU wheel index (default {CPU_INDEX})")


def ensure_rootfs(rootfs: Rootfs) -> str:
    ref = rootfs.ref()
    if image_exists(ref):
        return ref
    if shutil.which("debootstrap") is None:
        raise ImagesError("debootstrap is not installed: apt-get install debootstrap (ci/setup.sh does, as root)")
    say(f"making {ref}: debootstrap {rootfs.suite} from {rootfs.mirror} (a few minutes, once)")
    t0 = time.monotonic()
    ctr = buildah("from", "scratch").stdout.strip()
    try:
        mnt = buildah("mount", ctr).stdout.strip()
        cmd = ["debootstrap", "--variant=minbase"]
        if rootfs.include:
            cmd.append("--include=" + ",".join(rootfs.include))
        cmd += [rootfs.suite, mnt, rootfs.mirror]
        script = Path("/usr/share/debootstrap/scripts") / rootfs.suite
        if not script.exists() and rootfs.script:
            cmd.append(str(script.with_name(rootfs.script)))
        log = HOME / f"debootstrap-{rootfs.name}.log"
        with open(log, "w") as fh:
            r = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise ImagesError(f"debootstrap {rootfs.suite} failed ({r.returncode}); its log: {log}")
        # apt's downloaded packages are not part of a base image.
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (Path(mnt) / junk).glob("*"):
                if p.is_file():
                    p.unlink()
        buildah("umount", ctr)
        buildah("config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--cmd", "/bin/bash", "--label", f"org.vlmpath.standin.rootfs={rootfs.name}", ctr)
        buildah("commit", "-q", "--rm", ctr, ref)
        ctr = ""
    finally:
        if ctr:
            buildah("rm", ctr, check=False)
    say(f"made {ref} in {time.monotonic() - t0:.0f} s")
    return ref


def ensure_standin(standin: Standin) -> str:
    """The stand-in base's image reference, made (once per key) if the store lacks it."""
    with store_lock():
        rootfs_ref = ensure_rootfs(standin.rootfs)
        if standin.py_prefix is None:
            buildah("tag", rootfs_ref, f"{STANDIN_REPO}:{standin.flavor}")
            return rootfs_ref
        wheel = torch_wheel()
        wheel_sha = _sha256(wheel)
        lock_text = (STANDIN_DIR / "torch.lock").read_text(encoding="utf-8")
        ref = f"{STANDIN_REPO}:{standin.flavor}-{standin.key(wheel_sha, lock_text)}"
        if image_exists(ref):
            say(f"stand-in base {ref}: cached")
            return _finish_standin(ref, standin.flavor)
        say(f"making {ref} (python at {standin.py_prefix}, {wheel.name})")
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="standin-", dir=HOME) as ctx:
            ctx_dir = Path(ctx)
            try:
                os.link(wheel, ctx_dir / wheel.name)
            except OSError:
                shutil.copy2(wheel, ctx_dir / wheel.name)
            shutil.copy2(STANDIN_DIR / "torch.lock", ctx_dir / "torch.lock")
            r = subprocess.run([*buildah_cmd(), "bud", "--isolation", "chroot", "--network", "host",
                                "--pull=never", "--no-cache", "--force-rm", *ca_secret(), "-f", str(STANDIN_DIR / "Containerfile"),
                                "--build-arg", f"ROOTFS={rootfs_ref}",
                                "--build-arg", f"PY_PREFIX={standin.py_prefix}",
                                "--build-arg", f"TORCH_WHEEL={wheel.name}",
                                "--build-arg", f"TORCH_SHA256={wheel_sha}",
                                "--build-arg", f"STANDIN_FOR={standin.stands_for}",
                                "-t", ref, str(ctx_dir)], capture_output=True, text=True)
        log = _save_log(ref, r.stdout + r.stderr)
        if r.returncode != 0:
            raise ImagesError(f"the stand-in base {ref} did not build ({_last_lines(r.stderr, 1)}); its log: {log}")
        say(f"made {ref} in {time.monotonic() - t0:.0f} s")
        return _finish_standin(ref, standin.flavor)


def _finish_standin(keyed: str, flavor: str) -> str:
    """KEYED with the host's CA where needed, tagged :FLAVOR; other keys' images removed."""
    ref = with_host_ca(keyed, flavor)
    # One image per flavor: an older key's (or CA's) is replaced, not kept beside it.
    for old in _tags(STANDIN_REPO):
        if re.fullmatch(rf".*:{re.escape(flavor)}-[0-9a-f]{{16}}(-ca[0-9a-f]{{8}})?", old) and old not in (keyed, ref):
            buildah("rmi", old, check=False)
    buildah("tag", ref, f"{STANDIN_REPO}:{flavor}")
    return ref


def host_ca() -> Path | None:
    """The CA bundle this host's pip trusts (PIP_CERT or pip's config), if one is set: where
    HTTPS goes through an intercepting proxy, its CA is in there, not in a fresh image's."""
    found = os.environ.get("VLMPATH_BUILD_CA") or os.environ.get("PIP_CERT")
    if not found:
        r = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.cert"],
                           capture_output=True, text=True)
        found = r.stdout.strip() if r.returncode == 0 else ""
    return Path(found) if found and Path(found).is_file() else None


def with_host_ca(ref: str, flavor: str) -> str:
    """REF, or where this host reaches the package index through an intercepting proxy (its
    CA in the host's bundle), REF plus a layer that makes pip trust the host's bundle
    (/etc/pip.conf): the Dockerfiles' pip steps then work here as on a user's box. A stand-in's
    own difference from the real base (docs/docker.md), keyed by the bundle's hash."""
    ca = host_ca()
    if ca is None:
        return ref
    sha = _sha256(ca)
    trusted = f"{ref}-ca{sha[:8]}"
    if image_exists(trusted):
        return trusted
    ctr = buildah("from", "--pull=never", ref).stdout.strip()
    try:
        conf = HOME / "standin-pip.conf"
        conf.write_text("# The stand-in base trusts the bundle of the host it was made on (ci/local_images.py)\n"
                        "[global]\ncert = /usr/local/share/vlmpath-standin/host-ca.crt\n", encoding="utf-8")
        buildah("copy", ctr, str(ca), "/usr/local/share/vlmpath-standin/host-ca.crt")
        buildah("copy", ctr, str(conf), "/etc/pip.conf")
        buildah("config", "--label", f"org.vlmpath.standin.host-ca-sha256={sha}", ctr)
        buildah("commit", "-q", "--rm", ctr, trusted)
        ctr = ""
    finally:
        if ctr:
            buildah("rm", ctr, check=False)
    return trusted


def ca_secret() -> list[str]:
    """The stand-in's build-ca secret (docker/standin/Containerfile): the host's CA, or empty."""
    ca = host_ca()
    if ca is None:
        ca = HOME / "no-build-ca"
        ca.parent.mkdir(parents=True, exist_ok=True)
        ca.write_text("")
    return ["--secret", f"id=build-ca,src={ca}"]


def _pull(base: str) -> str:
    """A stand-in is never pulled (no registry); a real base is, when missing."""
    return "--pull=never" if base.startswith("localhost/") else "--pull"


def _save_log(ref: str, text: str) -> Path:
    """The whole build output, kept for the one who reads a failure (the last build's, per tag)."""
    logs = HOME / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / (re.sub(r"[^A-Za-z0-9_.-]+", "_", ref.split("/")[-1]) + ".log")
    path.write_text(text, encoding="utf-8")
    return path


def _tags(repo: str) -> list[str]:
    rows = json.loads(buildah("images", "--json").stdout or "[]")
    return [n for row in rows for n in (row.get("names") or []) if n.startswith(repo + ":")]


# buildah's own lines after a command in the container fails: they say nothing the
# command's own last lines do not.
_BUILDAH_TRAILER = re.compile(r"^(subprocess exited with status \d+|Error: exit status \d+)$")


def _last_lines(text: str, n: int) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not _BUILDAH_TRAILER.match(ln.strip())]
    return "\n".join(lines[-n:])


# --- builds ------------------------------------------------------------------------------
@dataclasses.dataclass
class BuildResult:
    name: str
    dockerfile: Path
    image: str | None  # the tag built, None when the build failed
    base: str
    seconds: float
    returncode: int
    log: str
    size: int = 0
    cannot: str | None = None  # what could not be built here, and why
    log_file: Path | None = None

    def tail(self, n: int = 5) -> str:
        return _last_lines(self.log, n)


def compose_build_args(name: str, compose: Path = COMPOSE, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The build args compose passes for the service whose Dockerfile is docker/<name>.Dockerfile."""
    doc = load_compose(compose, env)
    for svc in doc.get("services", {}).values():
        build = svc.get("build")
        if isinstance(build, dict) and Path(build.get("dockerfile", "")).name == f"{name}.Dockerfile":
            args = build.get("args") or {}
            if isinstance(args, list):
                args = dict(a.split("=", 1) for a in args)
            return {str(k): str(v) for k, v in args.items()}
    return {}


def build(dockerfile: Path, tag: str, *, context: Path = ROOT, build_args: Mapping[str, str] | None = None,
          no_cache: bool = False, base: str | None = None) -> BuildResult:
    """buildah bud of DOCKERFILE FROM its stand-in base (or BASE), tagged TAG; never raises on a failed build."""
    base = base or ensure_standin(standin_for(dockerfile))
    # --format docker: as docker builds them. buildah's default (OCI) drops SHELL, and every
    # RUN would run under /bin/sh without the Dockerfiles' `-o pipefail`.
    cmd = [*buildah_cmd(), "bud", "--isolation", "chroot", "--network", "host", "--layers", "--format", "docker",
           _pull(base), "--force-rm",
           "-f", str(dockerfile), "--build-arg", f"BASE_IMAGE={base}"]
    for k, v in (build_args or {}).items():
        cmd += ["--build-arg", f"{k}={v}"]
    if no_cache:
        cmd.append("--no-cache")
    cmd += ["-t", tag, str(context)]
    say(f"building {tag} from {dockerfile.name} (BASE_IMAGE={base})")
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.monotonic() - t0
    res = BuildResult(dockerfile.stem, dockerfile, tag if r.returncode == 0 else None, base, secs,
                      r.returncode, r.stdout + r.stderr)
    res.log_file = _save_log(tag, res.log)
    if res.image:
        res.size = image_size(tag)
        say(f"built {tag} in {secs:.0f} s ({res.size / 1e6:.0f} MB)")
    else:
        say(f"{tag} did not build ({r.returncode}) after {secs:.0f} s: {res.tail(1)} (log: {res.log_file})")
    return res


def vendor_failure(log: str) -> str | None:
    """The vendor host a failed build could not reach, if that is why it failed."""
    for host in VENDOR_HOSTS:
        if host in log and re.search(r"curl: \(\d+\)|Could not resolve|Failed to connect|Connection timed out|"
                                     r"Could not connect", log):
            return host
    return None


def without_vendor_steps(dockerfile: Path, out_dir: Path) -> Path:
    """A copy of DOCKERFILE without the RUN steps that need a vendor's apt repository."""
    text = dockerfile.read_text(encoding="utf-8")
    kept, dropped, block = [], [], []
    for line in text.splitlines(keepends=True):
        if block or line.startswith("RUN "):
            block.append(line)
            if line.rstrip().endswith("\\"):
                continue
            step = "".join(block)
            (dropped if any(m in step for m in VENDOR_STEP_MARKERS) else kept).append(step)
            block = []
        else:
            kept.append(line)
    if not dropped:
        raise ImagesError(f"{dockerfile} has no step that needs {' or '.join(VENDOR_HOSTS)}")
    out = out_dir / dockerfile.name
    out.write_text("".join(kept), encoding="utf-8")
    return out


def build_target(name: str, *, no_cache: bool = False, compose: Path = COMPOSE,
                 env: Mapping[str, str] | None = None, base: str | None = None) -> BuildResult:
    """docker/NAME.Dockerfile built as compose's service would be: vlmpath:NAME (from BASE:
    a real base image, e.g. the lock's TAG@DIGEST where a registry is reachable; default:
    the stand-in)."""
    dockerfile = DOCKER / f"{name}.Dockerfile"
    if not dockerfile.is_file():
        known = sorted(p.name.removesuffix(".Dockerfile") for p in DOCKER.glob("*.Dockerfile"))
        raise ImagesError(f"no docker/{name}.Dockerfile: choose from {', '.join(known)}")
    res = build(dockerfile, f"{IMAGE_REPO}:{name}", build_args=compose_build_args(name, compose, env),
                no_cache=no_cache, base=base)
    host = None if res.image else vendor_failure(res.log)
    if host:
        # What builds here without the vendor's repositories, under its own name.
        with tempfile.TemporaryDirectory(prefix="novendor-", dir=HOME) as tmp:
            partial = without_vendor_steps(dockerfile, Path(tmp))
            res2 = build(partial, f"{IMAGE_REPO}:{name}-novendor", no_cache=no_cache, base=res.base)
        res2.name, res2.dockerfile = name, dockerfile
        res2.cannot = (f"{dockerfile.name}'s steps that need {', '.join(VENDOR_HOSTS)} (unreachable here: "
                       f"the build stopped at {host}); the rest is built as {IMAGE_REPO}:{name}-novendor")
        res2.log = res.log + "\n--- without the vendor steps ---\n" + res2.log
        return res2
    return res


# --- compose -----------------------------------------------------------------------------
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's variable substitution: $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}, $$."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3)
        val = env.get(name)
        if op in (":-", ":?") and not val:
            if op == ":?":
                raise ImagesError(f"compose: {name} is required: {arg}")
            return interpolate(arg, env)
        if op in ("-", "?") and val is None:
            if op == "?":
                raise ImagesError(f"compose: {name} is required: {arg}")
            return interpolate(arg, env)
        return val or ""
    return _VAR.sub(sub, value)


def _interp_tree(node: object, env: Mapping[str, str]) -> object:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_interp_tree(v, env) for v in node]
    if isinstance(node, dict):
        return {k: _interp_tree(v, env) for k, v in node.items()}
    return node


def load_compose(path: Path = COMPOSE, env: Mapping[str, str] | None = None) -> dict:
    """The compose file as compose reads it: YAML merge keys resolved, variables substituted."""
    env = dict(os.environ if env is None else env)
    dotenv = path.parent / ".env"
    if dotenv.is_file():  # compose's .env beside the file: the shell's values win
        for line in dotenv.read_text(encoding="utf-8").splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                k, v = line.split("=", 1)
                env.setdefault(k.strip(), v.strip())
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
        raise ImagesError(f"{path} is not a compose file with services")
    return _interp_tree(doc, env)  # type: ignore[return-value]


@dataclasses.dataclass
class Mount:
    source: Path
    target: str
    read_only: bool
    volume: str | None = None  # the named volume's name, for a volume mount


@dataclasses.dataclass
class Service:
    """One compose service, resolved as `docker compose run` would start it."""

    name: str
    image: str
    entrypoint: list[str] | None
    command: list[str] | None
    working_dir: str | None
    environment: dict[str, str]
    mounts: list[Mount]
    user: str | None
    hostname: str | None
    ulimits: dict[str, tuple[int, int]]
    healthcheck: list[str] | None
    raw: dict

    def not_exercised(self) -> dict[str, str]:
        return {k: why for k, why in NOT_EXERCISED.items() if k in self.raw}


def _argv(value: object, what: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, list):
        return [str(v) for v in value]
    raise ImagesError(f"compose: {what} is neither a string nor a list")


def _env(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        out = {}
        for item in value:
            k, _, v = str(item).partition("=")
            out[k] = v
        return out
    return {str(k): "" if v is None else str(v) for k, v in dict(value).items()}


_LIMITS = {"memlock": resource.RLIMIT_MEMLOCK, "stack": resource.RLIMIT_STACK,
           "nofile": resource.RLIMIT_NOFILE, "nproc": resource.RLIMIT_NPROC, "core": resource.RLIMIT_CORE}


def service(name: str, compose: Path = COMPOSE, env: Mapping[str, str] | None = None,
            volumes_dir: Path | None = None, project_dir: Path | None = None) -> Service:
    """SERVICE of COMPOSE; relative paths resolve against PROJECT_DIR (compose's
    --project-directory: the compose file's own directory by default)."""
    doc = load_compose(compose, env)
    base_dir = project_dir or compose.parent
    try:
        svc = doc["services"][name]
    except KeyError:
        raise ImagesError(f"{compose} has no service {name!r} (it has: {', '.join(doc['services'])})") from None
    if "image" not in svc:
        raise ImagesError(f"compose service {name} names no image")
    vols_root = volumes_dir or HOME / "volumes"
    top_volumes = doc.get("volumes") or {}
    mounts = []
    for v in svc.get("volumes") or []:
        if isinstance(v, str):
            parts = v.split(":")
            src, target = parts[0], parts[1]
            ro = len(parts) > 2 and "ro" in parts[2].split(",")
            kind = "bind" if src.startswith((".", "/", "~")) else "volume"
            v = {"type": kind, "source": src, "target": target, "read_only": ro}
        if v.get("type") == "bind":
            src = (base_dir / os.path.expanduser(v["source"])).resolve()
            if not src.exists():
                raise ImagesError(f"compose service {name}: bind source {src} does not exist")
            mounts.append(Mount(src, v["target"], bool(v.get("read_only"))))
        elif v.get("type") == "volume":
            decl = top_volumes.get(v["source"]) or {}
            vol_name = decl.get("name") or f"{doc.get('name', base_dir.name)}_{v['source']}"
            mounts.append(Mount(vols_root / vol_name, v["target"], bool(v.get("read_only")), vol_name))
        else:
            raise ImagesError(f"compose service {name}: volume type {v.get('type')!r} is not handled here")
    ulimits = {}
    for k, lim in (svc.get("ulimits") or {}).items():
        if k not in _LIMITS:
            raise ImagesError(f"compose service {name}: ulimit {k} is not handled here")
        soft, hard = (lim.get("soft"), lim.get("hard")) if isinstance(lim, dict) else (lim, lim)
        ulimits[k] = tuple(resource.RLIM_INFINITY if int(x) < 0 else int(x) for x in (soft, hard))
    health = None
    if svc.get("healthcheck", {}).get("test"):
        test = _argv(svc["healthcheck"]["test"], "healthcheck.test") or []
        if test[0] == "CMD":
            health = test[1:]
        elif test[0] == "CMD-SHELL":
            health = ["/bin/sh", "-c", " ".join(test[1:])]
    return Service(name, str(svc["image"]), _argv(svc.get("entrypoint"), "entrypoint"),
                   _argv(svc.get("command"), "command"), svc.get("working_dir"), _env(svc.get("environment")),
                   mounts, svc.get("user"), svc.get("hostname"), ulimits, health, svc)


def _image_ref(image: str) -> str:
    return image if "/" in image.split(":", 1)[0] else f"localhost/{image}"


# --- runs --------------------------------------------------------------------------------
@dataclasses.dataclass
class ServiceRun:
    """A started (or finished) service container."""

    service: Service
    container: str
    argv: list[str]
    proc: subprocess.Popen
    network: str
    stdout: str = ""
    stderr: str = ""

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    unset_limits: dict[str, str] = dataclasses.field(default_factory=dict)

    def not_exercised(self) -> dict[str, str]:
        out = self.service.not_exercised()
        if self.network == "private" and "ports" in out:
            out["ports"] += "; the service answers on the container's own loopback"
        for k, why in self.unset_limits.items():
            out[f"ulimits.{k}"] = why
        return out

    def wait(self, timeout: float | None = None) -> int:
        self.stdout, self.stderr = self.proc.communicate(timeout=timeout)
        return self.proc.returncode

    def exec(self, argv: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess:
        """A second command in the same container (compose's healthcheck runs this way)."""
        cmd = [*buildah_cmd(), "run", "--isolation", "chroot", "--network", "host", self.container, "--", *argv]
        if self.network == "private":
            cmd = ["nsenter", f"--net=/proc/{self.proc.pid}/ns/net", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def host(self, argv: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess:
        """A host command in the container's network (its loopback, for a private network)."""
        cmd = list(argv)
        if self.network == "private":
            cmd = ["nsenter", f"--net=/proc/{self.proc.pid}/ns/net", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM to the container's process group (buildah and what it runs), then SIGKILL."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, sig)
            try:
                self.wait(timeout)
                break
            except subprocess.TimeoutExpired:
                continue
        return self.proc.returncode

    def remove(self) -> None:
        buildah("rm", self.container, check=False)


def _seed_volume(container: str, mount: Mount) -> None:
    """A new named volume starts with the image's content at its target, as Docker's do."""
    if mount.source.exists():
        return
    mnt = buildah("mount", container).stdout.strip()
    try:
        src = Path(mnt) / mount.target.lstrip("/")
        tmp = mount.source.with_name(mount.source.name + ".new")
        shutil.rmtree(tmp, ignore_errors=True)
        if src.is_dir():
            subprocess.run(["cp", "-a", str(src), str(tmp)], check=True)
        else:
            tmp.mkdir(parents=True)
        os.replace(tmp, mount.source)
    finally:
        buildah("umount", container, check=False)


def settable_limits(limits: Mapping[str, tuple[int, int]]) -> tuple[dict, dict[str, str]]:
    """Compose's ulimits this process may set (tried in a child), and why each other one is not."""
    ok, unset = {}, {}
    for k, (soft, hard) in limits.items():
        probe = f"import resource as r; r.setrlimit({int(_LIMITS[k])}, ({soft}, {hard}))"
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
        if r.returncode == 0:
            ok[k] = (soft, hard)
        else:
            now = resource.getrlimit(_LIMITS[k])
            want = "unlimited" if hard == resource.RLIM_INFINITY else hard
            unset[k] = (f"this machine does not let even root raise it (no CAP_SYS_RESOURCE): the "
                        f"container keeps the host's hard limit {now[1]}, not {want}")
    return ok, unset


def start(svc: Service, args: Sequence[str] | None = None, *, network: str = "host",
          extra_env: Mapping[str, str] | None = None, stdout: int | None = subprocess.PIPE,
          copy_in: Mapping[str, Path] | None = None) -> ServiceRun:
    """Start SVC's container as `docker compose run SERVICE ARGS` (or `up`, without ARGS) would.

    network="private" gives the container a network namespace of its own (loopback only),
    so a fixed port in the compose command cannot collide with the host's. ``copy_in``
    ({container path: host file}) replaces files in the container before it starts (a
    plant: the image as a Dockerfile with that file would have made it).
    """
    ref = _image_ref(svc.image)
    if not image_exists(ref):
        raise ImagesError(f"no image {ref} in buildah's store: ci/local-images.sh build first")
    cfg = image_config(ref)
    entry = svc.entrypoint if svc.entrypoint is not None else list(cfg.get("Entrypoint") or [])
    command = list(args) if args else (svc.command if svc.command is not None else list(cfg.get("Cmd") or []))
    argv = entry + command
    if not argv:
        raise ImagesError(f"service {svc.name}: no entrypoint and no command")
    ctr = buildah("from", "--pull=never", ref).stdout.strip()
    try:
        for path, src in (copy_in or {}).items():
            buildah("copy", "--chmod", "0755", ctr, str(src), path)
        for m in svc.mounts:
            if m.volume:
                m.source.parent.mkdir(parents=True, exist_ok=True)
                _seed_volume(ctr, m)
        cmd = [*buildah_cmd(), "run", "--isolation", "chroot", "--network", "host"]
        if svc.hostname:
            cmd += ["--hostname", svc.hostname]
        if svc.working_dir:
            cmd += ["--workingdir", svc.working_dir]
        if svc.user:
            cmd += ["--user", str(svc.user)]
        for k, v in {**svc.environment, **(extra_env or {})}.items():
            cmd += ["--env", f"{k}={v}"]
        for m in svc.mounts:
            cmd += ["--volume", f"{m.source}:{m.target}:{'ro' if m.read_only else 'rw'}"]
        cmd += [ctr, "--", *argv]
        if network == "private":
            # A network namespace of its own, loopback up; `exec` keeps the pid (for nsenter).
            cmd = ["unshare", "--net", "--", "/bin/sh", "-c", 'ip link set lo up && exec "$@"', "sh", *cmd]
        limits, unset = settable_limits(svc.ulimits)

        def apply_limits() -> None:  # compose's ulimits: a chroot inherits its parent's
            os.setsid()
            for k, (soft, hard) in limits.items():
                resource.setrlimit(_LIMITS[k], (soft, hard))

        proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE if stdout else None, text=True,
                                preexec_fn=apply_limits)
    except BaseException:
        buildah("rm", ctr, check=False)
        raise
    return ServiceRun(svc, ctr, argv, proc, network, unset_limits=unset)


def run(svc: Service, args: Sequence[str] | None = None, *, timeout: float = 1800, **kw) -> ServiceRun:
    """`docker compose run --rm SERVICE ARGS`: start, wait, remove the container."""
    r = start(svc, args, **kw)
    try:
        r.wait(timeout)
    except subprocess.TimeoutExpired:
        r.stop()
        raise ImagesError(f"service {svc.name} {' '.join(args or [])} still running after {timeout:.0f} s") from None
    finally:
        r.remove()
    return r


def wait_healthy(r: ServiceRun, deadline_s: float = 120) -> subprocess.CompletedProcess:
    """Compose's healthcheck, in the container, until it passes (or the service exits)."""
    if not r.service.healthcheck:
        raise ImagesError(f"service {r.service.name} has no healthcheck")
    end = time.monotonic() + deadline_s
    while True:
        h = r.exec(r.service.healthcheck)
        if h.returncode == 0:
            return h
        if r.returncode is not None:
            r.wait(30)
            raise ImagesError(f"service {r.service.name} exited {r.returncode} before it was healthy: "
                              f"{_last_lines(r.stderr, 3)}")
        if time.monotonic() > end:
            raise ImagesError(f"service {r.service.name} not healthy after {deadline_s:.0f} s: {_last_lines(h.stderr, 2)}")
        time.sleep(1)


# --- listing and cleaning ----------------------------------------------------------------
def listing() -> list[dict]:
    rows = json.loads(buildah("images", "--json").stdout or "[]")
    out = []
    for row in rows:
        names = [n for n in row.get("names") or [] if n.startswith((IMAGE_REPO + ":", STANDIN_REPO, ROOTFS_REPO))]
        if names:
            out.append({"names": names, "size": _bytes(row.get("size", 0)), "id": row.get("id", "")[:12]})
    return out


def prune() -> None:
    """Remove the images nothing needs any more: untagged and no image's parent (a previous
    build's steps, a failed build's). The layer cache of the tagged images stays."""
    buildah("rmi", "--prune", check=False)


def clean(bases: bool) -> None:
    for row in listing():
        for n in row["names"]:
            if n.startswith(IMAGE_REPO + ":") or bases:
                buildah("rmi", "-f", n, check=False)
    # Layers a --layers build cached for the images just removed.
    buildah("rmi", "--prune", check=False)


# --- CLI ---------------------------------------------------------------------------------
def _targets(names: Sequence[str]) -> list[str]:
    return list(names) or sorted(p.name.removesuffix(".Dockerfile") for p in DOCKER.glob("*.Dockerfile"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ci/local-images.sh", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("base", help="make (or find) the stand-in base of each Dockerfile")
    b.add_argument("names", nargs="*", help="Dockerfile names (docker/NAME.Dockerfile); default: all")
    bd = sub.add_parser("build", help="build docker/NAME.Dockerfile as vlmpath:NAME from its stand-in base")
    bd.add_argument("names", nargs="*", help="default: every docker/*.Dockerfile")
    bd.add_argument("--no-cache", action="store_true", help="rebuild every step (the base stays cached)")
    bd.add_argument("--base-image", help="a real base instead of the stand-in (one NAME only; e.g. "
                    "ci/base-images.sh ref docker/NAME.Dockerfile where a registry is reachable)")
    r = sub.add_parser("run", help="run a compose service's container as `docker compose run` would")
    r.add_argument("service")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the command (default: the service's)")
    r.add_argument("--compose", type=Path, default=COMPOSE)
    r.add_argument("--private-network", action="store_true",
                   help="a network namespace of its own (the service's fixed ports cannot collide)")
    sub.add_parser("images", help="list the images this script made")
    c = sub.add_parser("clean", help="remove the vlmpath images (and, with --bases, the stand-ins)")
    c.add_argument("--bases", action="store_true")
    a = p.parse_args(argv)
    try:
        if a.cmd == "base":
            for name in _targets(a.names):
                s = standin_for(DOCKER / f"{name}.Dockerfile")
                print(f"{name}: {ensure_standin(s)}\n  stands in for {s.stands_for}\n  not: {s.cannot}")
        elif a.cmd == "build":
            failed = 0
            names = _targets(a.names)
            if a.base_image and len(names) != 1:
                raise ImagesError("--base-image names the base of one Dockerfile: give exactly one NAME")
            for name in names:
                res = build_target(name, no_cache=a.no_cache, base=a.base_image)
                if res.image:
                    print(f"{name}: {res.image} ({res.size / 1e6:.0f} MB, {res.seconds:.0f} s)")
                    if res.cannot:
                        print(f"  cannot build here: {res.cannot}")
                else:
                    failed += 1
                    print(f"{name}: FAILED ({res.returncode}):\n{res.tail(15)}")
            prune()
            print(f"listed by: buildah --storage-driver {storage_driver()} images")
            return 1 if failed else 0
        elif a.cmd == "run":
            svc = service(a.service, a.compose)
            res = start(svc, a.args, network="private" if a.private_network else "host", stdout=None)
            for k, why in res.not_exercised().items():
                say(f"{svc.name}: {k} not exercised here ({why})")
            try:
                return res.proc.wait()
            except KeyboardInterrupt:
                return res.stop()
            finally:
                res.remove()
        elif a.cmd == "images":
            for row in listing():
                print(f"{row['id']}  {row['size'] / 1e6:7.0f} MB  {' '.join(row['names'])}")
            print(f"listed by: buildah --storage-driver {storage_driver()} images")
        elif a.cmd == "clean":
            clean(a.bases)
    except ImagesError as e:
        print(f"local-images: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
