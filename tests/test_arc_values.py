"""Do the runner scale sets of deploy/arc/ validate, keep PR code away from credentials, and
carry the names the workflows' runs-on ask for?

Offline (tests/arc_values.py): the chart values against their schema, the runner pod against
the Kubernetes schema (kubernetes-validate, strict), the project's rules. Each rule is shown
to catch a planted mistake; the real files stay green.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

import arc_values as arc

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(arc.ARC_DIR.glob("*.yaml"), key=lambda p: p.stem)
WORKFLOWS = [ROOT / ".github/workflows/bench-main.yml", ROOT / ".github/workflows/bench-gpu.yml",
             *sorted((ROOT / "ci/templates").glob("*-bench-gpu.yml"))]


def _values(name: str) -> dict:
    return arc.load(arc.ARC_DIR / f"{name}.yaml")


def _container(values: dict, name: str) -> dict:
    spec = values["template"]["spec"]
    return next(c for c in [*spec.get("initContainers", []), *spec["containers"]] if c["name"] == name)


def test_there_is_a_trusted_and_a_pr_scale_set_per_vendor():
    assert [p.stem for p in FILES] == ["amd-gpu", "amd-gpu-pr", "nvidia-gpu", "nvidia-gpu-pr"]
    for p in FILES:
        assert arc.load(p)["runnerScaleSetName"] == p.stem


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_each_scale_set_validates_and_keeps_the_rules(path):
    values = arc.load(path)
    assert arc.problems(values) == []
    vendor = path.stem.split("-")[0]
    assert _container(values, "dind")["resources"]["limits"][arc.GPU_RESOURCE[vendor]] >= 1


def _plant(name: str, how) -> list[str]:
    values = copy.deepcopy(_values(name))
    how(values)
    return arc.problems(values)


def _set_limits(key):
    def how(v):
        limits = _container(v, "dind")["resources"]["limits"]
        limits[key] = limits.pop(next(k for k in limits if k.endswith("/gpu")))
    return how


def _gpu_on_runner(v):
    _container(v, "runner")["resources"]["limits"] = {"nvidia.com/gpu": 1}


def _write_token(v):
    _container(v, "runner")["env"].append(
        {"name": "GITHUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gh-write", "key": "token"}}})


def _secret_env_from(v):
    _container(v, "runner")["envFrom"] = [{"secretRef": {"name": "gh-write"}}]


def _secret_volume(v):
    v["template"]["spec"]["volumes"].append({"name": "creds", "secret": {"secretName": "gh-write"}})


def _sa_token(v):
    v["template"]["spec"]["automountServiceAccountToken"] = True


def _host_path(v):
    v["template"]["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/var/run/docker.sock"}})


def _inline_token(v):
    v["githubConfigSecret"] = {"github_token": "ghp_planted"}


def _misplaced_limits(v):
    res = _container(v, "dind")["resources"]
    res["limit"] = res.pop("limits")


def _unknown_pod_field(v):
    v["template"]["spec"]["nodeselector"] = v["template"]["spec"].pop("nodeSelector")


def _no_dind(v):
    spec = v["template"]["spec"]
    spec["initContainers"] = [c for c in spec["initContainers"] if c["name"] != "dind"]


def _dind_exits(v):
    _container(v, "dind").pop("restartPolicy")


def _other_socket(v):
    env = _container(v, "runner")["env"]
    next(e for e in env if e["name"] == "DOCKER_HOST")["value"] = "tcp://localhost:2375"


def _trusted_pool(v):
    v["template"]["spec"]["nodeSelector"]["vlmpath-ci/pool"] = "trusted"


def _pr_pool(v):
    v["template"]["spec"]["nodeSelector"]["vlmpath-ci/pool"] = "pr"


def _container_mode(v):
    v["containerMode"] = {"type": "kubernetes"}


def _dind_image(image):
    def how(v):
        _container(v, "dind")["image"] = image
    return how


def _no_runtime_class(v):
    v["template"]["spec"].pop("runtimeClassName")


def _nvidia_runtime(v):
    v["template"]["spec"]["runtimeClassName"] = "nvidia"


def _nvidia_env(v):
    _container(v, "dind")["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})


PLANTS = {
    "nvidia-gpu-pr": [(_set_limits("nvidia.com/gpus"), "device plugin's resource is 'nvidia.com/gpu'"),
                      (_set_limits("amd.com/gpu"), "device plugin's resource is 'nvidia.com/gpu'"),
                      (_gpu_on_runner, "runner requests the GPU"),
                      (_write_token, "env GITHUB_TOKEN carries a credential"),
                      (_secret_env_from, "envFrom a Secret"),
                      (_secret_volume, "volume creds (secret)"),
                      (_sa_token, "automountServiceAccountToken must be false"),
                      (_host_path, "volume host (hostPath)"),
                      (_trusted_pool, "nodeSelector vlmpath-ci/pool must be 'pr'"),
                      (_inline_token, "values: {'github_token': 'ghp_planted'} is not of type 'string'"),
                      (_misplaced_limits, "'limit' was unexpected"),
                      (_unknown_pod_field, "'nodeselector' was unexpected"),
                      (_container_mode, "values: {'type': 'kubernetes'} is not of type 'null'"),
                      # The stock daemon has no NVIDIA toolkit: `--gpus all` would fail in every job.
                      (_dind_image("docker:27.5.1-dind"), "is not <registry>/vlmpath-dind-nvidia@sha256"),
                      # A tag moves; only a digest names what main built.
                      (_dind_image("ghcr.io/vlmpath/vlmpath/vlmpath-dind-nvidia:main"), "vlmpath-dind-nvidia@sha256"),
                      (_no_runtime_class, "runtimeClassName must be 'nvidia'")],
    "amd-gpu": [(_set_limits("nvidia.com/gpu"), "device plugin's resource is 'amd.com/gpu'"),
                (_no_dind, "no dind container"),
                (_dind_exits, "without restartPolicy Always"),
                (_other_socket, "not dind's unix:///var/run/docker.sock"),
                (_pr_pool, "nodeSelector vlmpath-ci/pool must be 'trusted'"),
                (_nvidia_runtime, "the AMD GPU needs no runtime"),
                (_dind_image("ghcr.io/vlmpath/vlmpath/vlmpath-dind-nvidia@unresolved"), "not the stock docker"),
                (_dind_image("docker:dind"), "not the stock docker:<version>-dind"),  # no version
                (_nvidia_env, "dind env NVIDIA_VISIBLE_DEVICES is NVIDIA's")],
}


@pytest.mark.parametrize("name, how, expect", [(n, h, e) for n, plants in PLANTS.items() for h, e in plants],
                         ids=[f"{n}-{i}" for n, plants in PLANTS.items() for i in range(len(plants))])
def test_each_planted_mistake_turns_red(name, how, expect):
    assert arc.problems(_values(name)) == []
    found = _plant(name, how)
    assert any(expect in p for p in found), found


def test_the_trusted_scale_set_may_hold_what_a_pr_one_may_not_and_the_pr_rules_still_apply():
    """The credential rules are the PR scale sets' only: the same env in a trusted runner is
    allowed (main's code), in its PR twin it is red."""
    for name, red in (("nvidia-gpu", False), ("nvidia-gpu-pr", True)):
        found = _plant(name, _write_token)
        assert bool(found) is red, (name, found)


def test_the_workflows_runs_on_labels_are_the_scale_set_names():
    labels = arc.workflow_labels({p.name: p.read_text(encoding="utf-8") for p in WORKFLOWS})
    pools = {"trusted": set(), "pr": set()}
    for p in FILES:
        v = arc.load(p)
        pools[v["template"]["spec"]["nodeSelector"]["vlmpath-ci/pool"]].add(v["runnerScaleSetName"])
    assert labels == pools == {"trusted": {"nvidia-gpu", "amd-gpu"}, "pr": {"nvidia-gpu-pr", "amd-gpu-pr"}}


def test_a_workflow_label_with_no_scale_set_is_seen():
    texts = {p.name: p.read_text(encoding="utf-8") for p in WORKFLOWS}
    texts["bench-gpu.yml"] = texts["bench-gpu.yml"].replace("'amd-gpu-pr'", "'amd-mi300-pr'")
    names = {arc.load(p)["runnerScaleSetName"] for p in FILES}
    labels = arc.workflow_labels(texts)
    assert labels["pr"] - names == {"amd-mi300-pr"}


def test_the_nvidia_scale_sets_name_the_dind_image_main_pushes_and_amd_the_same_engine():
    """The NVIDIA values' dind image is the repository bench-main's image job pushes
    docker/dind-nvidia.Dockerfile to (rendered for the repository the scale sets register
    with), pinned by digest or still `@unresolved`; AMD runs the stock dind of the Docker
    Engine version that Dockerfile installs."""
    main = yaml.safe_load((ROOT / ".github/workflows/bench-main.yml").read_text(encoding="utf-8"))
    job = main["jobs"]["image"]
    (entry,) = [e for e in job["strategy"]["matrix"]["include"] if e["dockerfile"] == "docker/dind-nvidia.Dockerfile"]
    assert entry["runner"] == "ubuntu-latest"  # built without a GPU, never on a PR runner
    dockerfile = (ROOT / entry["dockerfile"]).read_text(encoding="utf-8")
    engine = re.search(r"^ARG DOCKER_VERSION=5:(\d+\.\d+\.\d+)-", dockerfile, re.M).group(1)
    for p in FILES:
        v = arc.load(p)
        repo = v["githubConfigUrl"].removeprefix("https://github.com/")
        pushed = (job["env"]["REPOSITORY"].replace("${{ github.repository }}", repo)
                  .replace("${{ matrix.vendor }}", entry["vendor"]).lower())
        image = _container(v, "dind")["image"]
        if p.stem.startswith("nvidia"):
            assert image.partition("@")[0] == pushed == "ghcr.io/vlmpath/vlmpath/vlmpath-dind-nvidia", p.name
        else:
            assert image == f"docker:{engine}-dind", p.name
