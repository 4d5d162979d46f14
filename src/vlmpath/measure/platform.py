"""Which backend is this (cpu / cuda / rocm), which device, which versions, and what is
this machine called in the results?

ROCm builds of torch reuse the ``torch.cuda`` namespace (device string ``"cuda"``), so the
backend is told apart by ``torch.version.hip`` (a string on ROCm, None on CUDA). The
``Platform`` record is stored beside every result so that a base/head pair measured on
different toolchains is flagged instead of silently compared. The machine name
(``cpu-<model>``, ``cuda-h200``, ``rocm-mi300x``) names the asv results directory; it can be
pinned with ``VLMPATH_MACHINE`` because container hostnames change per run.
"""

from __future__ import annotations

import os
import platform as _pyplatform
import re
import sys
from dataclasses import asdict, dataclass
from types import ModuleType

import torch

from vlmpath import __version__
from vlmpath.core.backends import backend as backend_row

MACHINE_ENV = "VLMPATH_MACHINE"
# Words that say who made a device but not which device it is.
_VENDOR_WORDS = {"nvidia", "amd", "intel", "instinct", "geforce", "tesla", "radeon", "r", "tm",
                 "cpu", "processor", "core", "graphics", "corporation"}


@dataclass(frozen=True)
class Platform:
    """A fingerprint of the machine and toolchain a result was measured on."""

    backend: str          # "cpu" | "cuda" | "rocm"
    device: str           # torch device string: "cpu" or "cuda:0" (ROCm too)
    device_name: str      # "NVIDIA H200", "AMD Instinct MI300X", or the CPU model
    arch: str             # "sm_90", "gfx942", or the CPU architecture
    torch: str
    cuda: str | None
    hip: str | None
    driver: str | None
    transformers: str | None
    python: str
    cpu: str
    num_cpu: int
    vlmpath: str
    machine: str          # asv machine name (results directory)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def is_gpu(self) -> bool:
        return backend_row(self.backend).is_gpu


def detect_backend(torch_mod: ModuleType = torch) -> str:
    """``"rocm"`` if this torch is a HIP build with a device, ``"cuda"`` likewise, else ``"cpu"``."""
    if not torch_mod.cuda.is_available():
        return "cpu"
    return "rocm" if getattr(torch_mod.version, "hip", None) else "cuda"


def cpu_model() -> str:
    """The CPU model string from /proc/cpuinfo, falling back to the platform module."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _pyplatform.processor() or _pyplatform.machine() or "unknown"


def slug(text: str) -> str:
    """A short, stable, filesystem-safe name for a device model.

    >>> slug("AMD Instinct MI300X"), slug("NVIDIA H200"), slug("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz")
    ('mi300x', 'h200', 'xeon-platinum-8375c')
    """
    text = text.split("@", 1)[0]
    words = re.findall(r"[a-z0-9]+", text.lower())
    kept = [w for w in words if w not in _VENDOR_WORDS]
    return "-".join(kept)[:40].strip("-") or "unknown"


def machine_name(backend: str, device_name: str, override: str | None = None) -> str:
    """``<backend>-<device slug>``, unless ``override`` (e.g. from ``VLMPATH_MACHINE``) is set."""
    if override:  # VLMPATH_MACHINE is read here: a boundary, as --machine is (core.machine_names)
        from vlmpath.core.machine_names import MachineName

        return MachineName.parse(override, given=f"{MACHINE_ENV}=")
    return f"{backend}-{slug(device_name)}"


def _transformers_version() -> str | None:
    """The installed transformers' version, read from its distribution's metadata: importing
    transformers costs ~0.6 CPU-s, and every ``vlmpath run`` probes (twice). A transformers
    already imported (a benchmark process) says its own ``__version__``."""
    mod = sys.modules.get("transformers")
    if mod is not None and isinstance(getattr(mod, "__version__", None), str):
        return mod.__version__
    try:
        from importlib.metadata import version

        return version("transformers")
    except Exception:  # transformers is a dependency, but the probe must never fail on it
        return None


def probe(torch_mod: ModuleType = torch, env: dict[str, str] | None = None) -> Platform:
    """Read the backend, device and versions. ``torch_mod`` is injectable so that the GPU
    branches are tested on CPU with a fake module."""
    env = os.environ if env is None else env
    backend = detect_backend(torch_mod)
    cpu = cpu_model()
    device = backend_row(backend).device  # the backend table's device string
    if backend == "cpu":
        device_name, arch, driver = cpu, _pyplatform.machine(), None
    else:
        device_name = torch_mod.cuda.get_device_name(0)
        props = torch_mod.cuda.get_device_properties(0)
        if backend == "rocm":
            # gcnArchName looks like "gfx942:sramecc+:xnack-"; the features are not the arch.
            arch = str(getattr(props, "gcnArchName", "gfx?")).split(":", 1)[0]
            driver = str(getattr(torch_mod.version, "hip", None))
        else:
            arch = f"sm_{props.major}{props.minor}"
            driver = _cuda_driver(torch_mod)
    return Platform(
        backend=backend,
        device=device,
        device_name=device_name,
        arch=arch,
        torch=str(torch_mod.__version__),
        cuda=getattr(torch_mod.version, "cuda", None),
        hip=getattr(torch_mod.version, "hip", None),
        driver=driver,
        transformers=_transformers_version(),
        python=sys.version.split()[0],
        cpu=cpu,
        num_cpu=os.cpu_count() or 1,
        vlmpath=__version__,
        machine=machine_name(backend, device_name, env.get(MACHINE_ENV)),
    )


def _cuda_driver(torch_mod: ModuleType) -> str | None:
    """The NVIDIA driver version, if the driver API says it (best effort: never raises)."""
    try:
        v = torch_mod.cuda.driver_version() if hasattr(torch_mod.cuda, "driver_version") else None
        if v:
            return f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:
        pass
    return None


def sync(device: torch.device | str) -> None:
    """Wait for queued device work. A no-op on CPU, where ops run synchronously."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
