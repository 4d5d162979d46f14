"""Do the images build here, and does the container's own entrypoint run the main job and the PR flow?

No docker daemon, GPU or registry on this machine: ci/local_images.py builds every
docker/*.Dockerfile with buildah from a stand-in base made here (Debian + the CPU torch
2.13.0, cached by content between runs; the CUDA image is built from scratch, ``--no-cache``,
the others from buildah's layer cache where their steps are unchanged:
``VLMPATH_IMAGES_FROM_SCRATCH="cuda rocm dind-nvidia"`` rebuilds them all), and runs
docker/compose.yaml's services from them as compose would: the service's image,
entrypoint, command, working_dir, environment, ulimits and hostname, the checkout bind-mounted at the compose path (``..`` of the compose file, here a clone of this
repository with a #25910-style commit on a branch) and the results volume. All of it is read
from the compose file itself, so a change to it is what is tested. GPU device reservations
(and AMD's device nodes and groups) are the one thing not exercised: a chroot has no GPU;
``test_what_compose_asks_that_a_chroot_cannot_give_is_only_the_gpu`` says so for each service
(and that this sandbox cannot raise the memlock limit compose asks for).

In the CUDA image (the full set): ``vlmpath info``, ``vlmpath run --quick`` (narrowed with
``--bench``), the PR flow (``vlmpath ci pr``) on two commits, which fails on the planted
accuracy drop as the check must, and the dashboard service's command answering on its port
on the container's loopback (compose's own healthcheck, run in the container). The ROCm
image runs ``info``; the dind image is built as far as it builds without the Docker and
NVIDIA apt repositories (unreachable here). Each kind of mistake is planted and seen:
a pip step that replaces torch (the build fails, naming torch_guard), an entrypoint that
ignores the mounted checkout, a compose command with an option the CLI does not take, and a
runtime dependency the image lacks (an import that works on the host and fails in the image).

Marker ``images`` (and ``e2e``, so .ci/run runs it); needs root, buildah and debootstrap
(ci/setup.sh). Figures (sizes, build times, each command's last lines) are written to
``$VLMPATH_LOCAL_IMAGES_HOME/figures.json``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from vlmpath.render.escape import md_escape

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("local_images", ROOT / "ci" / "local_images.py")
li = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("local_images", li)
_spec.loader.exec_module(li)

pytestmark = [pytest.mark.e2e, pytest.mark.images, pytest.mark.timeout(3600)]

# Rebuilt with --no-cache each run (the others reuse buildah's layer cache where it holds
# their unchanged steps: on a fresh machine they are built from scratch too, and a changed
# Dockerfile or context is rebuilt from the changed step on). Space-separated names.
FROM_SCRATCH = os.environ.get("VLMPATH_IMAGES_FROM_SCRATCH", "cuda").split()
# Compose's variables as an unconfigured shell has them: every ${VAR:-default} takes its default.
COMPOSE_ENV: dict[str, str] = {}
BENCH_UID = 1000  # compose's ${BENCH_UID:-1000}: the checkout is owned by it, as on a user's box
# run --quick, narrowed: one case's syncs and tok/s (the whole suite is minutes on 2 cores).
RUN_BENCH = r"bench_embed\.EmbedRoutine\.track_(syncs|tok_per_s)\('default', 'video'\)"
# The PR flow: tests/test_pr_replay.py's #25910 replay, as a PR's two commits.
PR_BENCH = r"bench_embed\.EmbedRoutine\.track_(accuracy|tok_per_s|syncs)\('default', 'multi_region'\)"
DEFAULT_ENCODE = 'encode: str = "batched"'
WHERE_IMPORTED = "import socket, vlmpath; print('vlmpath from', vlmpath.__file__); print('host', socket.gethostname())"
FIGURES: dict = {"load": [], "builds": {}, "commands": {}}


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def _git(repo: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), "-c", "user.name=images", "-c", "user.email=i@example.com",
                        "-c", "commit.gpgsign=false", *args], capture_output=True, text=True)
    assert r.returncode == 0, f"git {args}: {r.stderr}"
    return r.stdout.strip()


def _tail(text: str, n: int = 4) -> list[str]:
    return li._last_lines(text, n).splitlines()


def _record(name: str, r, seconds: float) -> None:
    FIGURES["commands"][name] = {"argv": r.argv, "exit": r.returncode, "seconds": round(seconds, 1),
                                 "load": _load(), "stdout_tail": _tail(r.stdout), "stderr_tail": _tail(r.stderr)}
    _save_figures()


def _save_figures() -> None:
    li.HOME.mkdir(parents=True, exist_ok=True)
    (li.HOME / "figures.json").write_text(json.dumps(FIGURES, indent=2, default=str) + "\n")


# --- what every green run and every plant is judged by ------------------------------------
def info_problems(r, machine: str = "cuda-local") -> list[str]:
    """`vlmpath info` in the image: it ran, on the stand-in's CPU torch, under the machine
    name compose's environment gives it."""
    if r.returncode != 0:
        return [f"vlmpath info exited {r.returncode}: {' | '.join(_tail(r.stderr, 2))}"]
    out = []
    if not re.search(r"^\s*torch: 2\.13\.0\+cpu$", r.stdout, re.M):
        out.append("info does not name the base's torch 2.13.0+cpu")
    if not re.search(rf"^\s*machine: {machine}$", r.stdout, re.M):
        out.append(f"info does not name the machine {machine} (compose's VLMPATH_MACHINE)")
    return out


def checkout_problems(r) -> list[str]:
    """The code that ran is the mounted checkout's, not the image's build-time copy."""
    if r.returncode != 0:
        return [f"exited {r.returncode}: {' | '.join(_tail(r.stderr, 2))}"]
    where = re.search(r"vlmpath from (\S+)", r.stdout)
    if not where or where.group(1) != "/workspace/src/vlmpath/__init__.py":
        return [f"vlmpath imported from {where.group(1) if where else '?'}, not the mounted checkout (/workspace/src)"]
    return []


def dashboard_problems(svc, index: Path) -> list[str]:
    """The dashboard service's command serves the results volume's dashboard on its port:
    compose's healthcheck passes in the container, and the page fetched on its loopback is
    the site's front page: vlmpath's landing page (html/vlmpath/index.html) where the run
    wrote one (``/`` redirects there: render.static_http), else INDEX (asv's html/index.html),
    read on the host."""
    landing = index.parent / "vlmpath" / "index.html"
    index = landing if landing.is_file() else index
    argv = svc.command or []
    port = argv[argv.index("--port") + 1] if "--port" in argv else "8080"
    published = [str(p).rsplit(":", 1)[-1] for p in svc.raw.get("ports") or []]
    if published and published != [port]:
        return [f"compose publishes container port(s) {published}, the command listens on {port}"]
    r = li.start(svc, network="private")
    t0 = time.monotonic()
    try:
        try:
            li.wait_healthy(r, deadline_s=180)
        except li.ImagesError as e:
            return [str(e)]
        page = r.host([sys.executable, "-c", f"import urllib.request as u; "
                       f"print(u.urlopen('http://127.0.0.1:{port}/', timeout=10).read().decode())"])
        if page.returncode != 0 or page.stdout.rstrip("\n") != index.read_text().rstrip("\n"):
            return [f"127.0.0.1:{port}/ is not {index}: {' | '.join(_tail(page.stderr or page.stdout, 2))}"]
    finally:
        r.stop()
        r.remove()
        _record(f"{svc.name}: {' '.join(argv)}", r, time.monotonic() - t0)
    if r.returncode is not None and "Traceback" in r.stderr:
        return [f"the dashboard printed a traceback: {_tail(r.stderr, 2)}"]
    return []


# --- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def builds() -> dict:
    if os.geteuid() != 0 or not shutil.which("buildah") or not shutil.which("debootstrap"):
        pytest.fail("the image tests need root, buildah and debootstrap: ci/setup.sh installs them "
                    "(apt-get install buildah debootstrap)")
    out = {}
    FIGURES["storage_driver"] = li.storage_driver()
    for name in ("cuda", "rocm", "dind-nvidia"):
        load = _load()
        t0 = time.monotonic()
        base = li.ensure_standin(li.standin_for(li.DOCKER / f"{name}.Dockerfile"))
        base_s = time.monotonic() - t0
        res = li.build_target(name, no_cache=name in FROM_SCRATCH, env=COMPOSE_ENV)
        out[name] = res
        FIGURES["builds"][name] = {"image": res.image, "size_mb": round(res.size / 1e6), "base": base,
                                   "no_cache": name in FROM_SCRATCH,
                                   "base_seconds": round(base_s, 1), "build_seconds": round(res.seconds, 1),
                                   "load_before": load, "load_after": _load(), "cannot": res.cannot,
                                   "tail": res.tail(3).splitlines()}
        _save_figures()
    li.prune()  # the previous run's steps: vfs or overlay, they would pile up run after run
    return out


class Checkout:
    """A clone of this repository, as a user's checkout: main, and a PR branch on it."""

    def __init__(self, tmp: Path):
        self.repo = tmp / "checkout"
        subprocess.run(["git", "clone", "-q", "--no-local", str(ROOT), str(self.repo)], check=True)
        _git(self.repo, "checkout", "-q", "-B", "main")  # asv.conf.json's branch
        # The CPU band of tests/test_pr_replay.py: a 2-core box's timing noise decides nothing
        # (committed: `vlmpath run` refuses a dirty work tree).
        (self.repo / "pr-thresholds.yaml").write_text("factor: {gpu: 0.10, cpu: 1.0}\n")
        _git(self.repo, "add", "pr-thresholds.yaml")
        _git(self.repo, "commit", "-qm", "the image test's thresholds")
        self.good = _git(self.repo, "rev-parse", "HEAD")
        _git(self.repo, "checkout", "-q", "-b", "pr")
        path = self.repo / "src/vlmpath/engines/pipelines.py"
        text = path.read_text()
        assert text.count(DEFAULT_ENCODE) == 1, "pipelines.py changed: update this test's PR commit"
        path.write_text(text.replace(DEFAULT_ENCODE, 'encode: str = "batched_by_span"'))
        _git(self.repo, "commit", "-qam", "default encode: batched_by_span (#25910)")
        self.bad = _git(self.repo, "rev-parse", "HEAD")
        _git(self.repo, "checkout", "-q", "main")
        self.volumes = tmp / "volumes"
        # The container user owns the checkout, as BENCH_UID=$(id -u) makes it on a user's box.
        subprocess.run(["chown", "-R", f"{BENCH_UID}:100", str(self.repo)], check=True)

    def service(self, name: str, compose: Path = li.COMPOSE):
        """NAME as `docker compose -f COMPOSE --project-directory <checkout>/docker` has it."""
        return li.service(name, compose, env=COMPOSE_ENV, volumes_dir=self.volumes,
                          project_dir=self.repo / "docker")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Checkout:
    return Checkout(tmp_path_factory.mktemp("images"))


def _run(checkout: Checkout, service: str, args: list[str], record: str | None = None, **kw):
    svc = checkout.service(service)
    t0 = time.monotonic()
    r = li.run(svc, args, timeout=1200, **kw)
    if record:
        _record(record, r, time.monotonic() - t0)
    return r


@pytest.fixture(scope="module")
def cuda(builds, checkout) -> dict:
    """The CUDA image's commands, in the order a user runs them (the dashboard serves what run wrote)."""
    assert builds["cuda"].image, builds["cuda"].tail(20)
    out = {"info": _run(checkout, "bench-cuda", ["info"], "bench-cuda: info"),
           "where": _run(checkout, "bench-cuda", ["python3", "-c", WHERE_IMPORTED], "bench-cuda: python3 -c <where>")}
    out["run"] = _run(checkout, "bench-cuda", ["--quick", "--bench", RUN_BENCH], "bench-cuda: --quick --bench ...")
    out["pr"] = _run(checkout, "bench-cuda",
                     ["ci", "pr", "--base", "main", "--head", "pr", "--bench", PR_BENCH, "--out", "/results/pr",
                      "--config", "/workspace/pr-thresholds.yaml", "--no-charts"],
                     "bench-cuda: ci pr --base main --head pr ...", extra_env={"OMP_NUM_THREADS": "1"})
    return out


# --- builds ----------------------------------------------------------------------------------
def _in_image(ref: str, argv: list[str]) -> subprocess.CompletedProcess:
    ctr = li.buildah("from", "--pull=never", ref).stdout.strip()
    try:
        return subprocess.run([*li.buildah_cmd(), "run", "--isolation", "chroot", ctr, "--", *argv],
                              capture_output=True, text=True)
    finally:
        li.buildah("rm", ctr, check=False)


@pytest.mark.parametrize("name, prefix", [("cuda", "/opt/conda"), ("rocm", "/opt/venv")])
def test_the_benchmark_images_build_from_their_standin_with_torch_held(builds, name, prefix):
    res = builds[name]
    assert res.image == f"localhost/vlmpath:{name}", res.tail(20)
    assert li.image_exists(f"localhost/vlmpath:{name}")  # kept in the store under its stable name
    cfg = li.image_config(res.image)
    assert cfg["Entrypoint"] == ["/usr/local/bin/vlmpath-entrypoint"] and cfg["Cmd"] == ["run"]
    assert cfg["User"] == str(BENCH_UID)  # compose's build arg reached the build
    versions = json.loads(_in_image(res.image, ["cat", "/opt/vlmpath/versions.json"]).stdout)
    assert versions["torch"] == "2.13.0+cpu" and versions["backend"] == "cpu"
    assert versions["base_image"] == res.base  # the stand-in, by its content key
    assert versions["packages"]["vlmpath"] and versions["packages"]["asv"].startswith("0.6")
    r = _in_image(res.image, ["sh", "-c", "command -v python3; cat /opt/vlmpath/constraints.txt"])
    assert r.stdout.splitlines()[0] == f"{prefix}/bin/python3"  # the base's python, as the real base's
    assert "torch==2.13.0+cpu" in r.stdout.splitlines()
    # "torch_guard: torch unchanged": the guard ran after each pip step (in this build, or
    # in the one whose steps the layer cache holds: versions.json, above, is written after it).
    assert res.log.count("torch_guard: torch unchanged") == 2 or res.log.count("--> Using cache") >= 10
    # The Dockerfile's SHELL (bash -o pipefail) is in force, as under docker build.
    assert "SHELL is not supported" not in res.log
    assert li.buildah("inspect", "--type", "image", "--format", "{{.Docker.Config.Shell}}", res.image).stdout.strip() \
        == "[/bin/bash -o pipefail -c]"


def test_the_dind_image_builds_as_far_as_the_vendor_repositories_allow(builds):
    res = builds["dind-nvidia"]
    assert res.image, res.tail(20)
    if res.image == "localhost/vlmpath:dind-nvidia":
        return  # the vendors' repositories were reachable: the whole image built
    assert res.image == "localhost/vlmpath:dind-nvidia-novendor"
    assert re.search(r"the build stopped at (download\.docker\.com|nvidia\.github\.io)", res.cannot)
    cfg = li.image_config(res.image)
    assert cfg["Entrypoint"] == ["/usr/local/bin/dind-entrypoint"]
    assert cfg["Cmd"] == ["dockerd", "--host=unix:///var/run/docker.sock"]
    # The entrypoint is there, executable, and valid bash; the base tools of its first step too.
    r = _in_image(res.image, ["bash", "-c", "test -x /usr/local/bin/dind-entrypoint && bash -n "
                              "/usr/local/bin/dind-entrypoint && command -v curl gpg iptables && "
                              ". /etc/os-release && echo $VERSION_CODENAME"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "noble"


def test_the_standin_base_is_reused_by_its_key(builds):
    t0 = time.monotonic()
    again = li.ensure_standin(li.standin_for(li.DOCKER / "cuda.Dockerfile"))
    assert again == builds["cuda"].base and time.monotonic() - t0 < 60
    keyed = [n for n in li._tags(li.STANDIN_REPO) if re.fullmatch(r".*:conda-[0-9a-f]{16}", n)]
    assert len(keyed) == 1 and again.startswith(keyed[0])  # one per flavor: an older key's was removed


# --- the CUDA image, run as compose runs it --------------------------------------------------
def test_info_runs_in_the_cuda_image(cuda):
    assert info_problems(cuda["info"]) == []


def test_the_cuda_image_runs_the_mounted_checkout(cuda):
    assert checkout_problems(cuda["where"]) == []
    assert "host vlmpath-cuda" in cuda["where"].stdout  # compose's hostname


def test_run_quick_runs_the_suite_of_the_mounted_checkout_into_the_results_volume(cuda, checkout):
    r = cuda["run"]
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "benchmarks import vlmpath from /workspace/src/vlmpath" in r.stdout
    results = checkout.volumes / "vlmpath-results"
    # compose's VLMPATH_MACHINE default, the entrypoint's --results-dir and --html-dir
    fp = results / "asv" / "cuda-local" / f"vlmpath-fingerprint-{checkout.good[:8]}.json"
    assert json.loads(fp.read_text())["machine"] == "cuda-local"
    assert (results / "html" / "index.html").is_file()


def test_the_pr_flow_on_two_commits_fails_on_the_planted_regression(cuda, checkout):
    r = cuda["pr"]
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]  # the check fails, as it must
    comment = (checkout.volumes / "vlmpath-results" / "pr" / "comment.md").read_text()
    first = comment.splitlines()[1]
    assert "1 newly failing" in first and md_escape("accuracy 1.00 -> 0.60") in first
    run = json.loads((checkout.volumes / "vlmpath-results" / "pr" / "run.json").read_text())
    assert (run["base_sha"], run["head_sha"]) == (checkout.good, checkout.bad)


def test_the_dashboard_service_answers_on_its_port(cuda, checkout):
    assert cuda["run"].returncode == 0  # what it serves
    index = checkout.volumes / "vlmpath-results" / "html" / "index.html"
    assert dashboard_problems(checkout.service("dashboard"), index) == []


def test_the_rocm_image_runs_info(builds, checkout):
    assert builds["rocm"].image, builds["rocm"].tail(20)
    r = _run(checkout, "bench-rocm", ["info"], "bench-rocm: info")
    assert info_problems(r, machine="rocm-local") == []


def test_what_compose_asks_that_a_chroot_cannot_give_is_only_the_gpu(checkout, tmp_path):
    """GPU device reservations (and AMD's device nodes and groups) are not exercised here."""
    gpu = {"deploy", "devices", "group_add", "cap_add", "security_opt"}
    for name in ("bench-cuda", "bench-rocm", "serve-bench"):
        svc = li.service(name, env={"VLMPATH_SERVE_MODEL": str(tmp_path)}, volumes_dir=checkout.volumes,
                         project_dir=checkout.repo / "docker")
        assert set(svc.not_exercised()) <= gpu, name
    # The dashboard's published host port is not either: it answers on the container's loopback.
    assert set(checkout.service("dashboard").not_exercised()) == {"ports"}
    # compose's ulimits are set on the process the chroot inherits them from; this sandbox
    # lets even root not raise memlock (no CAP_SYS_RESOURCE), and the run says so.
    ok, unset = li.settable_limits(checkout.service("bench-cuda").ulimits)
    assert "stack" in ok and set(ok) | set(unset) == {"stack", "memlock"}
    assert all("CAP_SYS_RESOURCE" in why for why in unset.values())


# --- plants: each kind of mistake turns the check red ------------------------------------------
def _fake_torch_wheel(dest: Path, version: str = "2.13.0+cu124") -> Path:
    """A wheel named torch VERSION, as a CUDA build from PyPI would install over the base's."""
    files = {"torch/__init__.py": f"__version__ = {version!r}\nfrom . import version\n",
             "torch/version.py": f"__version__ = {version!r}\ncuda = '12.4'\nhip = None\n",
             f"torch-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
             f"torch-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(text.encode())}")
        z.writestr(f"torch-{version}.dist-info/RECORD", "\n".join(record) + f"\ntorch-{version}.dist-info/RECORD,,\n")
    path = dest / f"torch-{version}-py3-none-any.whl"
    path.write_bytes(buf.getvalue())
    return path


def _context_copy(dest: Path) -> Path:
    """What the build context holds of this checkout (.dockerignore's allow-list), copied."""
    for rel in ("pyproject.toml", "README.md", "ci/constraints.txt", ".dockerignore",
                "docker/entrypoint.sh", "docker/torch_guard.py", "docker/cuda.Dockerfile"):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    shutil.copytree(ROOT / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    return dest


def test_a_pip_step_that_replaces_torch_fails_the_build_naming_the_guard(builds, tmp_path):
    """The constraint dropped from the package step, and a CUDA torch in its pip install: the
    image's torch_guard stops the build. (The unchanged Dockerfile's build is the green pair.)"""
    assert builds["cuda"].image
    ctx = _context_copy(tmp_path / "ctx")
    wheel = _fake_torch_wheel(ctx / "src")  # src/ is in the context's allow-list
    df = ctx / "docker" / "cuda.Dockerfile"
    text = df.read_text()
    old_pip = ("RUN PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir --no-deps \\\n"
               "        --constraint /opt/vlmpath/constraints.txt /tmp/vlmpath-src \\\n")
    assert old_pip in text, "cuda.Dockerfile's package step changed: update this plant"
    text = text.replace(old_pip, "RUN PIP_CONSTRAINT= PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir "
                                 f"--no-deps /tmp/vlmpath-src/src/{wheel.name} /tmp/vlmpath-src \\\n")
    df.write_text(text)
    res = li.build(df, "localhost/vlmpath:plant-torch", context=ctx, base=builds["cuda"].base,
                   build_args=li.compose_build_args("cuda", env=COMPOSE_ENV))
    FIGURES["builds"]["plant: pip replaces torch"] = {"seconds": round(res.seconds, 1), "exit": res.returncode,
                                                      "load_after": _load(), "tail": res.tail(3).splitlines()}
    _save_figures()
    assert res.returncode != 0 and res.image is None
    assert not li.image_exists("localhost/vlmpath:plant-torch")
    assert "torch_guard: dist_version changed from '2.13.0+cpu' to '2.13.0+cu124'" in res.log
    assert "torch_guard: torch.version.cuda changed from None to '12.4'" in res.log
    assert "pip replaced the image's torch" in res.log


def test_an_entrypoint_that_ignores_the_mounted_checkout_is_caught(cuda, checkout, tmp_path):
    """The image as a Dockerfile that COPYs this entrypoint would make it: the checkout's src/
    never goes on the path, so the image's build-time copy runs instead."""
    text = (li.DOCKER / "entrypoint.sh").read_text()
    planted = tmp_path / "entrypoint.sh"
    old = 'use_checkout() {\n    [[ -d "$repo/src/vlmpath" ]] || return 0\n'
    assert old in text, "entrypoint.sh's use_checkout changed: update this plant"
    planted.write_text(text.replace(old, "use_checkout() {\n    return 0\n"))
    r = _run(checkout, "bench-cuda", ["python3", "-c", WHERE_IMPORTED],
             copy_in={"/usr/local/bin/vlmpath-entrypoint": planted})
    problems = checkout_problems(r)
    assert problems == ["vlmpath imported from /opt/conda/lib/python3.11/site-packages/vlmpath/__init__.py, "
                        "not the mounted checkout (/workspace/src)"]
    assert checkout_problems(cuda["where"]) == []  # the real entrypoint, the same command


def test_a_compose_command_with_an_option_the_cli_does_not_take_is_caught(cuda, checkout, tmp_path):
    doc = yaml.safe_load(li.COMPOSE.read_text())
    cmd = doc["services"]["dashboard"]["command"]
    assert cmd[:2] == ["serve", "--bind"], "the dashboard command changed: update this plant"
    cmd[1] = "--host"  # what compose shipped once: `vlmpath serve` takes --bind
    planted = tmp_path / "compose.yaml"
    planted.write_text(yaml.safe_dump(doc, sort_keys=False))
    problems = dashboard_problems(checkout.service("dashboard", planted),
                                  checkout.volumes / "vlmpath-results" / "html" / "index.html")
    assert len(problems) == 1 and "exited 2 before it was healthy" in problems[0]
    assert "unknown option --host" in problems[0]  # the CLI names the option (cli.help)


def test_a_runtime_dependency_the_image_lacks_is_caught(builds, tmp_path):
    """An import of a package the host's venv has (a test extra) and the image does not: the
    host's `vlmpath info` passes, the image's fails."""
    assert builds["cuda"].image
    plant = Checkout.__new__(Checkout)
    plant.repo, plant.volumes = tmp_path / "checkout", tmp_path / "volumes"
    subprocess.run(["git", "clone", "-q", "--no-local", str(ROOT), str(plant.repo)], check=True)
    init = plant.repo / "src" / "vlmpath" / "__init__.py"
    init.write_text(init.read_text() + "\nimport hypothesis  # planted: a test extra, not a dependency\n")
    subprocess.run(["chown", "-R", f"{BENCH_UID}:100", str(plant.repo)], check=True)
    host = subprocess.run([sys.executable, "-m", "vlmpath.cli", "info"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(plant.repo / "src")}, cwd=plant.repo)
    assert host.returncode == 0, host.stderr  # on the host it imports
    r = _run(plant, "bench-cuda", ["info"])
    problems = info_problems(r)
    assert len(problems) == 1 and "No module named 'hypothesis'" in problems[0], problems
