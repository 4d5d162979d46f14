"""Which project rules do our Dockerfiles and compose file break that hadolint cannot see?

Each checker takes the parsed file and returns a list of problems (empty: fine), so tests
can feed both the real files and deliberately bad ones. hadolint misses these: it accepts
``ARG BASE_IMAGE=rocm/pytorch:latest`` + ``FROM ${BASE_IMAGE}`` (DL3007 only fires on a
literal ``FROM x:latest``), knows nothing of torch, and never sees compose files.
"""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dockerfile_parse import DockerfileParser

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# Packages that must come from the base image, never from an index.
TORCH_FAMILY = re.compile(r"^(torch|torchvision|torchaudio|triton|pytorch-triton-rocm)(\[.*\])?([=<>!~ ].*)?$",
                          re.IGNORECASE)
PIP_INSTALL = re.compile(r"(?:^|\s)(?:python3?(?:\.\d+)?\s+-m\s+)?pip3?\s+install\b")
SHELL_SPLIT = re.compile(r"&&|\|\||;|\|")
VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def parse_dockerfile(source: str | Path) -> DockerfileParser:
    """Parse a Dockerfile from a path or from its text (dockerfile-parse treats a
    ``path=`` as a directory, so the file object is what works)."""
    if isinstance(source, Path):
        data = source.read_bytes()
    else:
        data = source.encode("utf-8")
    return DockerfileParser(fileobj=io.BytesIO(data))


def _stages(dfp: DockerfileParser) -> list[list[dict[str, Any]]]:
    """Instructions grouped per stage; the first group holds the ARGs before any FROM."""
    stages: list[list[dict[str, Any]]] = [[]]
    for ins in dfp.structure:
        if ins["instruction"] == "FROM":
            stages.append([])
        stages[-1].append(ins)
    return stages


def _arg_defaults(instrs: Iterable[dict[str, Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for ins in instrs:
        if ins["instruction"] == "ARG" and "=" in ins["value"]:
            name, _, value = ins["value"].partition("=")
            out[name.strip()] = value.strip().strip('"\'')
    return out


def image_ref_problems(ref: str, where: str) -> list[str]:
    """An image reference must carry an explicit tag or digest, and the tag is not latest."""
    if not ref or "$" in ref:
        return [f"{where}: image {ref!r} is unresolved (give the ARG a pinned default)"]
    if DIGEST.search(ref):
        return []
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return [f"{where}: image {ref!r} has no tag (pin a full version tag or @sha256 digest)"]
    tag = last.split(":", 1)[1]
    if tag.lower() == "latest":
        return [f"{where}: image {ref!r} uses 'latest' (pin a full version tag)"]
    return []


def base_image_problems(dfp: DockerfileParser) -> list[str]:
    """Every FROM, with ARG defaults resolved, and every *IMAGE ARG default, is pinned."""
    problems: list[str] = []
    froms = [i for i in dfp.structure if i["instruction"] == "FROM"]
    if not froms:
        return ["no FROM instruction"]
    global_args = _arg_defaults(_stages(dfp)[0])
    stage_names: set[str] = set()
    for ins in froms:
        words = ins["value"].split()
        raw = next((w for w in words if not w.startswith("--")), "")
        resolved = VAR.sub(lambda m: global_args.get(m.group(1), m.group(0)), raw)
        if resolved not in stage_names and resolved != "scratch":
            problems += image_ref_problems(resolved, f"line {ins['startline'] + 1} FROM {raw}")
        if len(words) >= 3 and words[-2].upper() == "AS":
            stage_names.add(words[-1])
    for ins in dfp.structure:
        if ins["instruction"] == "ARG" and "=" in ins["value"]:
            name, _, value = ins["value"].partition("=")
            if "IMAGE" in name.upper():
                problems += image_ref_problems(value.strip().strip('"\''),
                                               f"line {ins['startline'] + 1} ARG {name}")
    return problems


def user_problems(dfp: DockerfileParser) -> list[str]:
    """The final stage ends as a non-root user (ARG defaults resolved)."""
    last_stage = _stages(dfp)[-1]
    users = [i for i in last_stage if i["instruction"] == "USER"]
    if not users:
        return ["no USER in the final stage: the image would run as root"]
    args = _arg_defaults(_stages(dfp)[0]) | _arg_defaults(last_stage)
    raw = users[-1]["value"].strip()
    user = VAR.sub(lambda m: args.get(m.group(1), m.group(0)), raw).split(":", 1)[0]
    if "$" in user or not user:
        return [f"final USER {raw!r} does not resolve (give the ARG a default)"]
    if user in ("root", "0"):
        return [f"final USER {raw!r} is root"]
    return []


def pip_problems(dfp: DockerfileParser) -> list[str]:
    """No RUN installs torch from an index; every pip install comes after the torch
    guard's record step, runs under the torch constraint, and is followed, in the same
    RUN, by the guard's verify step."""
    problems: list[str] = []
    for stage in _stages(dfp):
        constraint_env = recorded = False
        for ins in stage:
            if ins["instruction"] == "ENV" and "PIP_CONSTRAINT=" in ins["value"]:
                constraint_env = True
            if ins["instruction"] != "RUN":
                continue
            where = f"line {ins['startline'] + 1} RUN"
            value = ins["value"]
            installs = bool(PIP_INSTALL.search(value))
            if installs and not recorded:
                problems.append(f"{where}: pip install before 'torch_guard.py record' "
                                "(the torch constraint does not exist yet)")
            recorded = recorded or "torch_guard.py record" in value
            if re.search(r"\bconda\s+install\b.*\b(pytorch|torch)\b", value):
                problems.append(f"{where}: conda installs torch over the image's build")
            for cmd in SHELL_SPLIT.split(value):
                if not PIP_INSTALL.search(cmd):
                    continue
                try:
                    tokens = shlex.split(cmd)
                except ValueError:
                    tokens = cmd.split()
                after = tokens[tokens.index("install") + 1:]
                for tok in after:
                    if TORCH_FAMILY.match(tok):
                        problems.append(f"{where}: installs {tok!r} from the index; the "
                                        "image's torch must never be replaced")
                    if "download.pytorch.org" in tok:
                        problems.append(f"{where}: uses the PyTorch wheel index ({tok})")
                    if tok in ("-I", "--ignore-installed", "--force-reinstall"):
                        problems.append(f"{where}: {tok} would reinstall the image's torch")
                has_flag = any(t in ("-c", "--constraint") or t.startswith("--constraint=")
                               for t in after)
                inline = "PIP_CONSTRAINT=" in cmd
                if not (has_flag or inline or constraint_env):
                    problems.append(f"{where}: pip install without the torch constraint "
                                    "(--constraint or PIP_CONSTRAINT)")
                if "torch_guard.py verify" not in value:
                    problems.append(f"{where}: pip install is not followed by "
                                    "'torch_guard.py verify' in the same RUN")
    return problems


def dockerfile_problems(source: str | Path) -> list[str]:
    dfp = parse_dockerfile(source)
    return base_image_problems(dfp) + user_problems(dfp) + pip_problems(dfp)


def find_tool(name: str) -> str | None:
    """A validator's executable: the running venv's bin first, then PATH."""
    import shutil
    import sys

    return shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)


def copy_sources(dfp: DockerfileParser) -> list[str]:
    """Build-context paths that COPY/ADD read (not --from= stages)."""
    out: list[str] = []
    for ins in dfp.structure:
        if ins["instruction"] not in ("COPY", "ADD"):
            continue
        tokens = shlex.split(ins["value"])
        if any(t.startswith("--from=") for t in tokens):
            continue
        paths = [t for t in tokens if not t.startswith("--")]
        out += paths[:-1]
    return out


# --- .dockerignore -------------------------------------------------------------------
def _ignore_regex(pattern: str) -> re.Pattern[str]:
    parts = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            parts.append(".*")
            i += 2
            if pattern.startswith("/", i):
                parts[-1] = "(?:.*/)?"
                i += 1
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(parts) + "$")


def dockerignored(path: str, dockerignore: str) -> bool:
    """Whether Docker leaves ``path`` out of the build context: the last matching pattern
    wins, ``!`` re-includes, and a pattern matching a parent directory covers the path."""
    rules = []
    for line in dockerignore.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pat = line[1:] if negate else line
        rules.append((negate, _ignore_regex(pat.strip("/"))))
    path = path.strip("/")
    segments = path.split("/")
    candidates = ["/".join(segments[: n + 1]) for n in range(len(segments))]
    ignored = False
    for negate, rx in rules:
        if any(rx.match(c) for c in candidates):
            ignored = not negate
    return ignored


def dockerignore_problems(dockerignore: str, needed: Iterable[str],
                          kept_out: Iterable[str]) -> list[str]:
    problems = [f".dockerignore excludes {p!r}, which a Dockerfile COPYs"
                for p in needed if dockerignored(p, dockerignore)]
    problems += [f".dockerignore lets {p!r} into the build context"
                 for p in kept_out if not dockerignored(p, dockerignore)]
    return problems


# --- compose ---------------------------------------------------------------------------
def _volume_mounts(service: Mapping[str, Any]) -> list[dict[str, Any]]:
    mounts = []
    for v in service.get("volumes") or []:
        if isinstance(v, str):
            parts = v.split(":")
            mounts.append({"source": parts[0], "target": parts[1] if len(parts) > 1 else parts[0],
                           "read_only": len(parts) > 2 and "ro" in parts[2].split(",")})
        else:
            mounts.append({"source": v.get("source"), "target": v.get("target"),
                           "read_only": bool(v.get("read_only"))})
    return mounts


def _env(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _nvidia_markers(service: Mapping[str, Any]) -> list[str]:
    found = []
    if "gpus" in service:
        found.append("gpus:")
    if service.get("runtime") == "nvidia":
        found.append("runtime: nvidia")
    devs = (((service.get("deploy") or {}).get("resources") or {}).get("reservations") or {})
    for d in devs.get("devices") or []:
        if d.get("driver") == "nvidia" or "gpu" in (d.get("capabilities") or []):
            found.append("an nvidia device reservation")
    if "NVIDIA_VISIBLE_DEVICES" in _env(service):
        found.append("NVIDIA_VISIBLE_DEVICES")
    return found


def _amd_markers(service: Mapping[str, Any]) -> list[str]:
    found = [f"device {d}" for d in service.get("devices") or []
             if str(d).split(":")[0].startswith(("/dev/kfd", "/dev/dri"))]
    found += [f"group_add {g}" for g in service.get("group_add") or [] if "RENDER_GID" in str(g)]
    return found


def _machine_default(value: str) -> str:
    m = re.fullmatch(r"\$\{VLMPATH_MACHINE:?-(.*)\}", value)
    return m.group(1) if m else value


#: Where the serve profile's services see the model directory.
SERVE_MODEL_TARGET = "/model"


def compose_problems(data: Mapping[str, Any]) -> list[str]:
    """Vendor isolation, GPU access, results volume, repo mount and a stable machine name."""
    problems: list[str] = []
    if "results" not in (data.get("volumes") or {}):
        problems.append("no top-level named volume 'results' (history would not accumulate)")
    services = data.get("services") or {}
    for name, svc in services.items():
        profiles = set(svc.get("profiles") or [])
        nv, amd = _nvidia_markers(svc), _amd_markers(svc)
        mounts = _volume_mounts(svc)
        results = [m for m in mounts if m["source"] == "results"]
        if not results:
            problems.append(f"{name}: does not mount the 'results' volume")
        if "amd" in profiles:
            problems += [f"{name} (amd): carries NVIDIA setting {m}" for m in nv]
            devices = {str(d).split(":")[0] for d in svc.get("devices") or []}
            for need in ("/dev/kfd", "/dev/dri"):
                if need not in devices:
                    problems.append(f"{name} (amd): missing device {need}")
            groups = [str(g) for g in svc.get("group_add") or []]
            if "video" not in groups:
                problems.append(f"{name} (amd): group_add lacks video")
            if not any("${RENDER_GID" in g for g in groups):
                problems.append(f"{name} (amd): group_add lacks the host render GID ${{RENDER_GID}}")
            if "seccomp=unconfined" not in (svc.get("security_opt") or []):
                problems.append(f"{name} (amd): security_opt lacks seccomp=unconfined")
        if "nvidia" in profiles:
            problems += [f"{name} (nvidia): carries AMD setting {m}" for m in amd]
            if not any("reservation" in m or m == "gpus:" for m in nv):
                problems.append(f"{name} (nvidia): no NVIDIA GPU reservation")
        if profiles & {"amd", "nvidia"}:
            if any(m["read_only"] for m in results):
                problems.append(f"{name}: writes results but mounts the results volume read-only")
            if svc.get("ipc") != "host":
                problems.append(f"{name}: needs ipc: host (the host's /dev/shm)")
            if svc.get("ipc") == "host" and "shm_size" in svc:
                problems.append(f"{name}: shm_size does nothing next to ipc: host (Docker ignores it)")
            env = _env(svc)
            repo = env.get("VLMPATH_REPO", "/workspace")
            if not any(m["target"] == repo and m["source"] not in ("results",) for m in mounts):
                problems.append(f"{name}: the repository is not mounted at {repo} (asv needs git)")
            if not _machine_default(env.get("VLMPATH_MACHINE", "")).strip():
                problems.append(f"{name}: VLMPATH_MACHINE has no stable default "
                                "(container hostnames change per run)")
        elif "serve" in profiles:  # an engine server of a model directory and the client driving it
            problems += [f"{name} (serve): carries AMD setting {m}" for m in amd]
            models = [m for m in mounts if m["target"] == SERVE_MODEL_TARGET]
            if not models:
                problems.append(f"{name} (serve): the model directory is not mounted at {SERVE_MODEL_TARGET}")
            problems += [f"{name} (serve): mounts the model directory writable (it must be read_only)"
                         for m in models if not m["read_only"]]
        else:
            problems += [f"{name}: has no GPU profile but requests {m}" for m in nv + amd]
    serving = {n: s for n, s in services.items() if "serve" in (s.get("profiles") or [])}
    if serving and not any(_nvidia_markers(s) for s in serving.values()):
        problems.append("serve profile: no service reserves the GPU for the engine server")
    return problems
