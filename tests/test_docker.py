"""Are the CUDA/ROCm Dockerfiles, the compose file and .dockerignore valid and safe?

No docker engine is needed: hadolint and check-jsonschema (pinned in
ci/requirements-lint.txt) validate the files, and tests/dockerlint.py checks the project
rules they cannot see. Each rule is also fed a bad file, to show it can fail.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
DOCKERFILES = [DOCKER / "cuda.Dockerfile", DOCKER / "rocm.Dockerfile"]
# The NVIDIA runner scale sets' Docker daemon (deploy/arc): linted as the others, but not a
# benchmark image (no torch, no pip, root on purpose): its own rules below.
DIND = DOCKER / "dind-nvidia.Dockerfile"
COMPOSE = DOCKER / "compose.yaml"

_spec = importlib.util.spec_from_file_location("dockerlint", Path(__file__).with_name("dockerlint.py"))
dl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dl)


def _tool(name: str) -> str:
    path = dl.find_tool(name)
    if path is None:
        pytest.fail(f"{name} is not installed; run: pip install -r ci/requirements-lint.txt")
    return path


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


# --- hadolint ------------------------------------------------------------------------
@pytest.mark.e2e
@pytest.mark.parametrize("dockerfile", [*DOCKERFILES, DIND], ids=lambda p: p.name)
def test_hadolint_passes_at_warning_level(dockerfile):
    r = subprocess.run([_tool("hadolint"), "-c", str(ROOT / ".hadolint.yaml"), "-t", "warning",
                        str(dockerfile)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.e2e
def test_hadolint_fails_on_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "bad.Dockerfile"
    bad.write_text("FROM ubuntu:latest\nRUN cd /tmp && pip install requests\n")
    r = subprocess.run([_tool("hadolint"), "-c", str(ROOT / ".hadolint.yaml"), "-t", "warning",
                        str(bad)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode != 0
    assert "DL3007" in r.stdout  # literal "latest"


# --- check-jsonschema on the compose file -----------------------------------------------
def _check_compose(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
                           str(path)], capture_output=True, text=True)


def test_compose_matches_the_compose_spec():
    r = _check_compose(COMPOSE)
    assert r.returncode == 0, r.stdout + r.stderr


def test_compose_spec_check_rejects_a_bad_file(tmp_path):
    data = _compose()
    del data["services"]["bench-cuda"]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"]
    data["services"]["bench-rocm"]["devicez"] = ["/dev/kfd"]
    bad = tmp_path / "compose.yaml"
    bad.write_text(yaml.safe_dump(data))
    r = _check_compose(bad)
    assert r.returncode != 0
    assert "capabilities" in r.stdout and "devicez" in r.stdout


# --- project rules on the real files ---------------------------------------------------
@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_follows_project_rules(dockerfile):
    assert dl.dockerfile_problems(dockerfile) == []


@pytest.mark.parametrize("dockerfile,prefix", [(DOCKERFILES[0], "pytorch/pytorch:"),
                                               (DOCKERFILES[1], "rocm/pytorch:rocm")],
                         ids=["cuda", "rocm"])
def test_base_image_is_the_vendor_pytorch_image(dockerfile, prefix):
    dfp = dl.parse_dockerfile(dockerfile)
    assert dfp.args["BASE_IMAGE"].startswith(prefix)
    assert dfp.baseimage == dfp.args["BASE_IMAGE"]  # FROM ${BASE_IMAGE}, default resolved
    assert dl.base_image_problems(dfp) == []


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_guards_torch_and_records_versions(dockerfile):
    runs = [i["value"] for i in dl.parse_dockerfile(dockerfile).structure if i["instruction"] == "RUN"]
    text = "\n".join(runs)
    assert text.index("torch_guard.py record") < text.index("pip install") < text.index("torch_guard.py verify")
    assert "torch_guard.py versions" in text
    dfp = dl.parse_dockerfile(dockerfile)
    assert dfp.envs["PIP_CONSTRAINT"] == "/opt/vlmpath/constraints.txt"
    entry = [i["value"] for i in dfp.structure if i["instruction"] == "ENTRYPOINT"]
    assert entry and "vlmpath-entrypoint" in entry[-1]


def test_vendor_settings_stay_in_their_dockerfile():
    rocm = dl.parse_dockerfile(DOCKERFILES[1])
    cuda = dl.parse_dockerfile(DOCKERFILES[0])
    assert not any(k.startswith("NVIDIA_") for k in rocm.envs)
    assert cuda.envs.get("NVIDIA_VISIBLE_DEVICES") == "all"


def test_compose_follows_project_rules():
    assert dl.compose_problems(_compose()) == []


def test_compose_services_profiles_and_dashboard():  # the serve profile: see its own tests below
    data = _compose()
    svc = data["services"]
    assert svc["bench-cuda"]["profiles"] == ["nvidia"]
    assert svc["bench-rocm"]["profiles"] == ["amd"]
    assert "profiles" not in svc["dashboard"]
    # The dashboard's command is run through the real CLI in tests/test_compose_dashboard.py.
    assert svc["dashboard"]["healthcheck"]["test"][0] == "CMD"
    assert all(str(p).startswith("127.0.0.1:") and str(p).endswith(":8080")
               for p in svc["dashboard"]["ports"])
    # Two vendors on one host must never write into one asv machine.
    machines = {dl._machine_default(dl._env(svc[n])["VLMPATH_MACHINE"]) for n in ("bench-cuda", "bench-rocm")}
    assert len(machines) == 2
    # Shared settings go through x- anchors, so both bench services get the same mounts.
    assert any(k.startswith("x-") for k in data)
    assert svc["bench-cuda"]["volumes"] == svc["bench-rocm"]["volumes"]
    for name in ("bench-cuda", "bench-rocm"):
        build = svc[name]["build"]
        context = (COMPOSE.parent / build["context"]).resolve()
        assert context == ROOT
        assert (context / build["dockerfile"]).is_file()


def test_dockerignore_keeps_what_is_copied_and_nothing_else():
    sources = sorted({s for f in [*DOCKERFILES, DIND] for s in dl.copy_sources(dl.parse_dockerfile(f))})
    assert "docker/dind-entrypoint.sh" in sources
    assert "src" in sources and "pyproject.toml" in sources
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8")
    needed = sources + ["src/vlmpath/cli/__init__.py"]
    kept_out = [".git", ".git/HEAD", ".venv/bin/python", "results/x.json", "reports/html/index.html",
                ".asv/results/m.json", "src/vlmpath/__pycache__/cli.cpython-311.pyc", "tests/test_docker.py"]
    assert dl.dockerignore_problems(ignore, needed, kept_out) == []


# --- the NVIDIA dind image -------------------------------------------------------------------
def dind_problems(text: str) -> list[str]:
    """The dind image's rules: its base pinned as every base is (the lock's tag, never
    latest), the Docker Engine and the NVIDIA Container Toolkit installed at pinned versions
    from their vendors' signed apt repositories, the `nvidia` runtime written into
    daemon.json, and nothing of this repository in it but its entrypoint."""
    dfp = dl.parse_dockerfile(text)
    out = dl.base_image_problems(dfp)
    runs = "\n".join(i["value"] for i in dfp.structure if i["instruction"] == "RUN")
    for pkg, arg in (("docker-ce", "DOCKER_VERSION"), ("nvidia-container-toolkit", "NVIDIA_TOOLKIT_VERSION"),
                     ("libnvidia-container1", "NVIDIA_TOOLKIT_VERSION")):
        if f'"{pkg}=${{{arg}}}"' not in runs or not dfp.args.get(arg):
            out.append(f"{pkg} is not installed at a pinned version (ARG {arg})")
    for repo in ("https://download.docker.com/linux/ubuntu", "https://nvidia.github.io/libnvidia-container/stable/deb/"):
        if not re.search(r"deb \[[^]]*signed-by=/etc/apt/keyrings/[^]]+\] " + re.escape(repo), runs):
            out.append(f"apt repository {repo} is not trusted through its own signed-by key")
    if "nvidia-ctk runtime configure --runtime=docker --config=/etc/docker/daemon.json" not in runs:
        out.append("the nvidia runtime is not configured in /etc/docker/daemon.json (nvidia-ctk runtime configure)")
    if dl.PIP_INSTALL.search(runs):
        out.append("pip install in the dind image")
    copied = dl.copy_sources(dfp)
    if copied != ["docker/dind-entrypoint.sh"]:
        out.append(f"COPY {copied}: the dind image holds only its entrypoint")
    return out


def test_the_dind_image_keeps_its_rules_and_its_base_is_in_the_lock():
    text = DIND.read_text(encoding="utf-8")
    assert dind_problems(text) == []
    lock = [ln.split() for ln in (DOCKER / "base-images.lock").read_text().splitlines() if ln and ln[0] != "#"]
    (entry,) = [e for e in lock if e[0] == DIND.name]
    assert dl.parse_dockerfile(text).baseimage == entry[1] and entry[2] == "unresolved"  # no digest read here
    entry_sh = (DOCKER / "dind-entrypoint.sh").read_text(encoding="utf-8")
    assert entry_sh.rstrip().endswith('exec "$@"')  # the scale sets' `dockerd ...` args run as given


@pytest.mark.parametrize("old, new, expect", [
    ("ARG BASE_IMAGE=ubuntu:24.04", "ARG BASE_IMAGE=ubuntu:latest", "uses 'latest'"),
    ('"nvidia-container-toolkit=${NVIDIA_TOOLKIT_VERSION}"', "nvidia-container-toolkit",
     "nvidia-container-toolkit is not installed at a pinned version"),
    ("signed-by=/etc/apt/keyrings/docker.asc", "trusted=yes", "download.docker.com/linux/ubuntu is not trusted"),
    ("nvidia-ctk runtime configure --runtime=docker", "nvidia-ctk --version", "nvidia runtime is not configured"),
    ("COPY --chmod=0755 docker/dind-entrypoint.sh", "COPY src /opt/src\nCOPY --chmod=0755 docker/dind-entrypoint.sh",
     "holds only its entrypoint"),
])
def test_the_dind_rules_catch_a_planted_mistake(old, new, expect):
    text = DIND.read_text(encoding="utf-8")
    assert old in text
    found = dind_problems(text.replace(old, new))
    assert any(expect in p for p in found), found


# --- the checkers fail on bad input --------------------------------------------------------
GOOD_TAIL = (
    "RUN python3 /opt/vlmpath/torch_guard.py record /opt/vlmpath\n"
    "RUN python3 -m pip install --no-cache-dir --constraint /opt/vlmpath/constraints.txt . "
    "&& python3 /opt/vlmpath/torch_guard.py verify /opt/vlmpath\n"
    "USER 1000\n"
)


def test_checker_accepts_a_minimal_good_dockerfile():
    text = "ARG BASE_IMAGE=rocm/pytorch:rocm6.4.1_ubuntu24.04_py3.12_pytorch_release_2.6.0\nFROM ${BASE_IMAGE}\n"
    assert dl.dockerfile_problems(text + GOOD_TAIL) == []


@pytest.mark.parametrize("head,expect", [
    ("ARG BASE_IMAGE=rocm/pytorch:latest\nFROM ${BASE_IMAGE}\n", "latest"),
    ("ARG BASE_IMAGE=pytorch/pytorch\nFROM ${BASE_IMAGE}\n", "no tag"),
    ("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n", "unresolved"),
    ("FROM pytorch/pytorch:latest\n", "latest"),
    ("FROM localhost:5000/pytorch\n", "no tag"),
], ids=["arg-latest", "arg-untagged", "arg-no-default", "from-latest", "registry-port-untagged"])
def test_checker_rejects_unpinned_base_images(head, expect):
    problems = dl.dockerfile_problems(head + GOOD_TAIL)
    assert any(expect in p for p in problems), problems


def test_checker_accepts_a_digest():
    head = "FROM rocm/pytorch@sha256:" + "a" * 64 + "\n"
    assert dl.dockerfile_problems(head + GOOD_TAIL) == []


HEAD = "FROM pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime\n"


@pytest.mark.parametrize("body,expect", [
    (GOOD_TAIL.replace("USER 1000\n", ""), "no USER"),
    (GOOD_TAIL.replace("USER 1000", "USER root"), "is root"),
    ("ARG UID=0\n" + GOOD_TAIL.replace("USER 1000", "USER ${UID}"), "is root"),
    (GOOD_TAIL.replace(" .", " torch==2.8.0 ."), "installs 'torch==2.8.0'"),
    (GOOD_TAIL.replace(" .", " torchvision ."), "installs 'torchvision'"),
    (GOOD_TAIL.replace(" .", " --index-url https://download.pytorch.org/whl/cu128 ."), "PyTorch wheel index"),
    (GOOD_TAIL.replace(" .", " --force-reinstall ."), "--force-reinstall"),
    (GOOD_TAIL.replace("--constraint /opt/vlmpath/constraints.txt ", ""), "without the torch constraint"),
    (GOOD_TAIL.replace(" && python3 /opt/vlmpath/torch_guard.py verify /opt/vlmpath", ""), "not followed by"),
    (GOOD_TAIL.replace("RUN python3 /opt/vlmpath/torch_guard.py record /opt/vlmpath\n", ""), "before 'torch_guard.py record'"),
    (GOOD_TAIL + "RUN pip3 install torch\n", "installs 'torch'"),
], ids=["no-user", "root", "root-via-arg", "pip-torch", "pip-torchvision", "torch-index",
        "force-reinstall", "no-constraint", "no-verify", "no-record", "late-pip3-torch"])
def test_checker_rejects_root_and_torch_installs(body, expect):
    problems = dl.dockerfile_problems(HEAD + body)
    assert any(expect in p for p in problems), problems


def test_checker_accepts_constraint_from_env():
    body = "ENV PIP_CONSTRAINT=/opt/vlmpath/constraints.txt\n" + GOOD_TAIL.replace(
        "--constraint /opt/vlmpath/constraints.txt ", "")
    assert dl.dockerfile_problems(HEAD + body) == []


def _problems_after(mutate) -> list[str]:
    data = _compose()
    mutate(data["services"], data)
    return dl.compose_problems(data)


def _nvidia_reservation(svc):
    return {"resources": {"reservations": {"devices": [{"driver": "nvidia", "count": "all",
                                                        "capabilities": ["gpu"]}]}}}


@pytest.mark.parametrize("mutate,expect", [
    (lambda s, d: s["bench-rocm"].update(deploy=_nvidia_reservation(s)), "bench-rocm (amd): carries NVIDIA"),
    (lambda s, d: s["bench-rocm"].update(gpus="all"), "bench-rocm (amd): carries NVIDIA setting gpus:"),
    (lambda s, d: s["bench-cuda"].update(devices=["/dev/kfd", "/dev/dri"]), "bench-cuda (nvidia): carries AMD"),
    (lambda s, d: s["bench-cuda"].pop("deploy"), "no NVIDIA GPU reservation"),
    (lambda s, d: s["bench-rocm"].update(devices=["/dev/dri"]), "missing device /dev/kfd"),
    (lambda s, d: s["bench-rocm"].update(group_add=["video"]), "RENDER_GID"),
    (lambda s, d: s["bench-rocm"].pop("security_opt"), "seccomp=unconfined"),
    (lambda s, d: s["bench-rocm"].pop("ipc"), "ipc: host"),
    (lambda s, d: s["bench-cuda"].update(shm_size="16g"), "shm_size does nothing"),
    (lambda s, d: s["bench-cuda"].update(volumes=["..:/workspace"]), "bench-cuda: does not mount the 'results'"),
    (lambda s, d: s["dashboard"].update(volumes=["..:/workspace:ro"]), "dashboard: does not mount the 'results'"),
    (lambda s, d: s["bench-rocm"].update(volumes=["..:/workspace", "results:/results:ro"]), "read-only"),
    (lambda s, d: s["bench-cuda"].update(volumes=["results:/results"]), "repository is not mounted"),
    (lambda s, d: s["bench-cuda"]["environment"].update(VLMPATH_MACHINE="${VLMPATH_MACHINE:-}"), "stable default"),
    (lambda s, d: s["dashboard"].update(devices=["/dev/kfd"]), "dashboard: has no GPU profile"),
    (lambda s, d: d.pop("volumes"), "no top-level named volume"),
], ids=["amd-nvidia-reservation", "amd-gpus", "nvidia-amd-devices", "nvidia-no-gpu", "amd-no-kfd",
        "amd-no-render-gid", "amd-seccomp", "amd-ipc", "shm-next-to-ipc-host", "cuda-no-results", "dashboard-no-results",
        "results-ro", "no-repo", "no-machine", "dashboard-gpu", "no-named-volume"])
def test_compose_checker_rejects_bad_files(mutate, expect):
    problems = _problems_after(mutate)
    assert any(expect in p for p in problems), problems


def _model_writable(s, d):
    for v in s["serve-engine"]["volumes"]:
        if v["target"] == "/model":
            s["serve-engine"]["volumes"] = [{**v, "read_only": False} if w is v else w
                                            for w in s["serve-engine"]["volumes"]]
            return


@pytest.mark.parametrize("mutate,expect", [
    (_model_writable, "serve-engine (serve): mounts the model directory writable"),
    (lambda s, d: s["serve-bench"].update(volumes=["..:/workspace", "results:/results"]),
     "serve-bench (serve): the model directory is not mounted"),
    (lambda s, d: s["serve-engine"].pop("deploy"), "no service reserves the GPU"),
    (lambda s, d: s["serve-engine"].update(devices=["/dev/kfd"]), "serve-engine (serve): carries AMD"),
], ids=["model-writable", "bench-no-model", "engine-no-gpu", "engine-amd"])
def test_the_serve_profile_checker_rejects_bad_files(mutate, expect):
    problems = _problems_after(mutate)
    assert any(expect in p for p in problems), problems


def test_the_serve_profile_serves_the_model_read_only_and_its_command_is_the_real_cli():
    from vlmpath.cli import build_parser
    from vlmpath.serving.launch import command

    svc = _compose()["services"]
    engine, bench = svc["serve-engine"], svc["serve-bench"]
    assert engine["profiles"] == bench["profiles"] == ["serve"]
    assert bench["depends_on"]["serve-engine"]["condition"] == "service_healthy"
    for s in (engine, bench):
        (model,) = [m for m in dl._volume_mounts(s) if m["target"] == "/model"]
        assert model["read_only"] and "VLMPATH_SERVE_MODEL" in model["source"]
    # The engine runs the server command `serve-bench --launch vllm` would (its own flags).
    ours = command("vllm", "python3", "/model", 8000, "cuda")
    assert engine["entrypoint"] == ours[:3]
    assert engine["command"][:2] == ["--model", "/model"] and "--trust-remote-code" in engine["command"]
    # The client's command through the real parser: the server, its kind, the model, the run file.
    args = build_parser().parse_args(bench["command"])
    assert args.command == "serve-bench" and args.server == "http://serve-engine:8000"
    assert args.server_kind == "vllm" and args.model == "/model" and args.out.startswith("/results/")
    port = engine["command"][engine["command"].index("--port") + 1]
    assert args.server.endswith(f":{port}")


def test_dockerignore_checker_rejects_bad_patterns():
    ignore = "*\n!src\n!pyproject.toml\n"
    assert dl.dockerignore_problems(ignore, ["src/vlmpath/cli/__init__.py"], [".git"]) == []
    assert dl.dockerignore_problems("src\n", ["src/vlmpath/cli/__init__.py"], []) == [
        ".dockerignore excludes 'src/vlmpath/cli/__init__.py', which a Dockerfile COPYs"]
    assert dl.dockerignore_problems(".venv\n", [], [".git/HEAD"]) == [
        ".dockerignore lets '.git/HEAD' into the build context"]
    # last match wins
    assert dl.dockerignored("src/a.py", "src\n!src/a.py\n") is False
    assert dl.dockerignored("src/a/__pycache__/x.pyc", "**/__pycache__\n") is True


# --- the torch guard the images run at build time ----------------------------------------
def _guard(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DOCKER / "torch_guard.py"), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.e2e
def test_torch_guard_records_verifies_and_catches_a_replaced_torch(tmp_path):
    import torch

    r = _guard("record", str(tmp_path))
    assert r.returncode == 0, r.stderr
    constraints = (tmp_path / "constraints.txt").read_text().splitlines()
    assert constraints[0] == f"torch=={torch.__version__}"
    assert _guard("verify", str(tmp_path)).returncode == 0

    baseline = tmp_path / "torch-baseline.json"
    data = json.loads(baseline.read_text())
    data["torch.version.hip"] = "6.4.43483"  # as if a ROCm build had been replaced
    baseline.write_text(json.dumps(data))
    r = _guard("verify", str(tmp_path))
    assert r.returncode == 1
    assert "torch.version.hip changed" in r.stderr

    r = _guard("versions", str(tmp_path), "--base-image", "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime")
    assert r.returncode == 0, r.stderr
    versions = json.loads((tmp_path / "versions.json").read_text())
    assert versions["torch"] == torch.__version__
    assert versions["cuda"] == torch.version.cuda and versions["hip"] == torch.version.hip
    assert versions["base_image"] == "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"
    assert versions["packages"]["torch"] == constraints[0].split("==")[1]


def test_torch_guard_verify_without_record_fails(tmp_path):
    r = _guard("verify", str(tmp_path))
    assert r.returncode == 1
    assert "record" in r.stderr


# --- the documented docker commands name real files, profiles and services ---------------
DOCKER_DOCS = {"README.md": "## A developer box with docker compose", "docs/docker.md": "# "}


def _readme_commands(page: str) -> list[str]:
    import re

    text = (ROOT / page).read_text(encoding="utf-8")
    start = text.index(DOCKER_DOCS[page])
    section = text[start:].split("\n## ", 1)[0] if page == "README.md" else text
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for b in blocks for line in b.splitlines() if "docker compose" in line]


@pytest.mark.parametrize("page", DOCKER_DOCS)
def test_readme_docker_commands_match_the_compose_file(page):
    import re

    commands = _readme_commands(page)
    assert len(commands) >= 8
    services = _compose()["services"]
    for cmd in commands:
        assert re.search(r"docker compose -f (\S+)", cmd).group(1) == "docker/compose.yaml", cmd
        profile = re.search(r"--profile (\S+)", cmd)
        target = re.search(r"\b(?:run --rm|up) (\S+)", cmd)
        if target:
            svc = services[target.group(1)]  # KeyError: the README names no such service
            assert (svc.get("profiles") or [None])[0] == (profile.group(1) if profile else None), cmd
        else:
            assert cmd.rstrip().endswith("build") and profile, cmd
    assert any("compare <base> <head>" in c for c in commands)
    assert any("RENDER_GID=$(getent group render | cut -d: -f3)" in line
               for line in (ROOT / page).read_text(encoding="utf-8").splitlines())
