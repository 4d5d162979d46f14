"""Is a runner scale set of deploy/arc/ one the workflows can run on, without giving PR code more?

The checks behind tests/test_arc_values.py, offline (no helm, no cluster):

- the chart values this project uses, against a schema of them (``VALUES_SCHEMA``: the
  gha-runner-scale-set keys, the GitHub credentials only as a pre-defined Secret's name);
- the runner pod template, against the Kubernetes API schema (kubernetes-validate's
  ``PodTemplate``, strict: an unknown or misplaced field is an error), for the oldest and
  the newest Kubernetes minor it checks (native sidecars need 1.29);
- the project's rules, which no schema can see: the vendor's device-plugin resource
  (``nvidia.com/gpu`` / ``amd.com/gpu``) on the dind sidecar, a Docker daemon the jobs'
  ``docker run`` reach, trusted and PR runners on separate node pools, and for a PR scale
  set nothing a job could write with (no Secret, no service-account token, no host path
  or namespace).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[1]
ARC_DIR = ROOT / "deploy" / "arc"
K8S_VERSIONS = ("1.29", "1.37")
GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
DOCKER_SOCK = "unix:///var/run/docker.sock"
# The NVIDIA dind sidecar: main's docker/dind-nvidia.Dockerfile image, pushed by bench-main's
# image job and named by digest (ci/arc-dind.sh pin); the AMD one: the stock daemon.
DIND_NVIDIA_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/-]{0,200}/vlmpath-dind-nvidia@(unresolved|sha256:[0-9a-f]{64})")
DIND_STOCK_IMAGE = re.compile(r"docker:\d+\.\d+\.\d+-dind")

VALUES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["githubConfigUrl", "githubConfigSecret", "runnerScaleSetName", "runnerGroup",
                 "minRunners", "maxRunners", "template"],
    "additionalProperties": False,
    "properties": {
        "githubConfigUrl": {"type": "string", "pattern": r"^https://github\.com/[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?$"},
        # A Secret's name (Kubernetes DNS subdomain), never a map holding a token or key.
        "githubConfigSecret": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"},
        "runnerScaleSetName": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]{0,43}[a-z0-9])?$"},
        "runnerGroup": {"type": "string", "minLength": 1},
        "minRunners": {"type": "integer", "minimum": 0},
        "maxRunners": {"type": "integer", "minimum": 1},
        # dind is written out in the template (the chart's advice for a customised dind).
        "containerMode": {"type": "null"},
        "template": {"type": "object", "required": ["spec"]},
        "listenerTemplate": {"type": "object"},
        "controllerServiceAccount": {"type": "object", "additionalProperties": False,
                                     "properties": {"namespace": {"type": "string"}, "name": {"type": "string"}}},
        "proxy": {"type": "object"},
        "githubServerTLS": {"type": "object"},
        "namespaceOverride": {"type": "string"},
        "fullnameOverride": {"type": "string"},
        "annotations": {"type": "object"},
        "labels": {"type": "object"},
    },
}


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def schema_problems(values: dict[str, Any]) -> list[str]:
    out = [f"values: {e.message} (at {'/'.join(map(str, e.absolute_path)) or 'top'})"
           for e in jsonschema.Draft202012Validator(VALUES_SCHEMA).iter_errors(values)]
    if out:
        return out
    pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": values["runnerScaleSetName"]},
           "template": values["template"]}
    for version in K8S_VERSIONS:
        try:
            kubernetes_validate.validate(pod, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            where = "/".join(map(str, e.absolute_path))
            out.append(f"template (Kubernetes {version}): {e.message} (at {where})")
    return out


def rule_problems(values: dict[str, Any]) -> list[str]:
    """The project's rules; assumes schema_problems found nothing."""
    name = values["runnerScaleSetName"]
    m = re.fullmatch(r"(nvidia|amd)-gpu(-pr)?", name)
    if not m:
        return [f"{name}: a scale set is named <nvidia|amd>-gpu[-pr] (the workflows' runs-on labels)"]
    vendor, pr = m.group(1), bool(m.group(2))
    spec = values["template"]["spec"]
    by_name = {c["name"]: c for c in _containers(spec)}
    out = []
    # The GPU: the vendor's device-plugin resource, on the dind sidecar (which runs the job's
    # containers), nowhere else, and no other vendor's.
    for c in _containers(spec):
        for kind in ("limits", "requests"):
            for key in c.get("resources", {}).get(kind, {}):
                if ("gpu" in key.lower() or key.endswith(".com/gpus")) and key != GPU_RESOURCE[vendor]:
                    out.append(f"{name}: {c['name']} {kind} {key!r}: the {vendor} device plugin's resource is "
                               f"{GPU_RESOURCE[vendor]!r}")
                elif key == GPU_RESOURCE[vendor] and c["name"] != "dind":
                    out.append(f"{name}: {c['name']} requests the GPU: only the dind sidecar's containers reach it")
    dind = by_name.get("dind")
    if dind is None:
        out.append(f"{name}: no dind container: the jobs' `docker run` needs a Docker daemon")
        return out
    gpus = dind.get("resources", {}).get("limits", {}).get(GPU_RESOURCE[vendor])
    if not isinstance(gpus, int) or gpus < 1:
        out.append(f"{name}: dind limits {GPU_RESOURCE[vendor]} is {gpus!r}, not a whole count of GPUs")
    if dind in spec.get("initContainers", []) and dind.get("restartPolicy") != "Always":
        out.append(f"{name}: dind is an init container without restartPolicy Always: it would exit before the job")
    if not dind.get("securityContext", {}).get("privileged") or "dockerd" not in dind.get("args", []):
        out.append(f"{name}: dind must run dockerd, privileged")
    out += _daemon_problems(name, vendor, spec, dind)
    runner = by_name.get("runner")
    if runner is None:
        return [*out, f"{name}: no runner container"]
    env = {e["name"]: e.get("value") for e in runner.get("env", [])}
    if env.get("DOCKER_HOST") != DOCKER_SOCK:
        out.append(f"{name}: the runner's DOCKER_HOST is {env.get('DOCKER_HOST')!r}, not dind's {DOCKER_SOCK}")
    mounts = [{m["name"] for m in c.get("volumeMounts", []) if m["mountPath"] == "/var/run"} for c in (runner, dind)]
    if not mounts[0] & mounts[1]:
        out.append(f"{name}: the runner and dind share no /var/run volume (the Docker socket)")
    # Trusted and PR runners never share nodes.
    pool = "pr" if pr else "trusted"
    if spec.get("nodeSelector", {}).get("vlmpath-ci/pool") != pool:
        out.append(f"{name}: nodeSelector vlmpath-ci/pool must be {pool!r}")
    tolerated = {(t.get("key"), t.get("value")) for t in spec.get("tolerations", [])}
    other = "trusted" if pr else "pr"
    if ("vlmpath-ci/pool", other) in tolerated or ("vlmpath-ci/pool", None) in tolerated:
        out.append(f"{name}: tolerates the {other} pool's taint")
    if pr:
        out += _pr_problems(name, values)
    return out


def _daemon_problems(name: str, vendor: str, spec: dict[str, Any], dind: dict[str, Any]) -> list[str]:
    """NVIDIA: the node's runtime puts the GPUs into dind, and dind's own toolkit hands them to
    `docker run --gpus all`, so the pod runs under the GPU Operator's RuntimeClass and dind is
    main's dind-nvidia image, by digest (or `@unresolved` until one is committed). AMD: the
    device plugin's amd.com/gpu schedules the pod and the privileged dind sees /dev/kfd and
    /dev/dri, so no runtime and the stock docker:dind, never the NVIDIA image."""
    image = str(dind.get("image", ""))
    env = {e["name"] for e in dind.get("env", [])}
    if vendor == "nvidia":
        out = [] if spec.get("runtimeClassName") == "nvidia" else [
            f"{name}: runtimeClassName must be 'nvidia' (the GPU Operator's runtime hands dind the GPUs)"]
        if not DIND_NVIDIA_IMAGE.fullmatch(image):
            out.append(f"{name}: dind image {image!r} is not <registry>/vlmpath-dind-nvidia@sha256:<64 hex> "
                       "(or @unresolved): the NVIDIA Container Toolkit is in main's dind-nvidia image only")
        return out
    out = [f"{name}: runtimeClassName {spec['runtimeClassName']!r}: the AMD GPU needs no runtime"
           ] if spec.get("runtimeClassName") else []
    if not DIND_STOCK_IMAGE.fullmatch(image):
        out.append(f"{name}: dind image {image!r} is not the stock docker:<version>-dind")
    out += [f"{name}: dind env {e} is NVIDIA's" for e in sorted(env) if e.startswith("NVIDIA_")]
    return out


def _pr_problems(name: str, values: dict[str, Any]) -> list[str]:
    """PR code runs in this pod: nothing in it a job could write or reach the cluster with."""
    spec = values["template"]["spec"]
    out = []
    if spec.get("automountServiceAccountToken") is not False:
        out.append(f"{name}: automountServiceAccountToken must be false (a Kubernetes API token for PR code)")
    for key in ("serviceAccountName", "serviceAccount", "hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(f"{name}: {key} is set in a PR runner's pod")
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        if kinds & {"secret", "projected", "hostPath", "csi", "persistentVolumeClaim"}:
            out.append(f"{name}: volume {v['name']} ({', '.join(sorted(kinds))}) in a PR runner's pod")
    for c in _containers(spec):
        for e in c.get("env", []):
            if "secretKeyRef" in e.get("valueFrom", {}) or re.search(r"TOKEN|SECRET|PASSWORD|_KEY$", e["name"]):
                out.append(f"{name}: {c['name']} env {e['name']} carries a credential into PR code")
        for e in c.get("envFrom", []):
            if "secretRef" in e:
                out.append(f"{name}: {c['name']} envFrom a Secret in a PR runner's pod")
    return out


def problems(values: dict[str, Any]) -> list[str]:
    return schema_problems(values) or rule_problems(values)


def workflow_labels(workflow_texts: dict[str, str]) -> dict[str, set[str]]:
    """The runs-on labels of the GPU jobs, as each workflow's defaults render them:
    {"trusted": bench-main.yml's, "pr": bench-gpu.yml's and the engine templates'}."""
    out: dict[str, set[str]] = {"trusted": set(), "pr": set()}
    for name, text in workflow_texts.items():
        wf = yaml.safe_load(text)
        for job in wf["jobs"].values():
            runners = [job.get("runs-on", "")] + [e.get("runner", "") for e in
                                                   job.get("strategy", {}).get("matrix", {}).get("include", [])]
            for r in runners:
                m = re.fullmatch(r"\$\{\{\s*vars\.([A-Z_]+RUNNER_LABEL)\s*\|\|\s*'([a-z0-9-]+)'\s*\}\}", str(r))
                if m:
                    out["pr" if "_PR_" in m.group(1) else "trusted"].add(m.group(2))
    return out
