"""Which machines does vlmpath measure on, and what does each kind of machine call things?

The one backend table. A ``Backend`` row says, for one kind of machine: the name the
platform probe reports (also the asv machine-name prefix, ``cuda-h200``), how people
write it, the torch device string, which noise band of ``thresholds.yaml`` its timings
get (``gpu``/``cpu``), the vendor's management tool, the fingerprint key holding the
vendor toolkit's version, and the hatch its bars get in the vendor chart.

The cross-vendor comparison sets every GPU backend beside ``VENDOR_REFERENCE`` (each
other backend's value divided by the reference's, ``vendor_backends``); the comparison,
the comment and the charts take the rows from here (or as a parameter: a test passes a
row the table does not have).

Adding a backend: one row here, plus its probe branch in ``measure/platform.py`` (how
torch tells it apart) and its devices in ``measure/platform.sync`` if it needs its own;
a reader in ``measure/gpu_state.READERS`` if its management tool is new.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from vlmpath.core.errors import UnknownNameError


@dataclass(frozen=True)
class Backend:
    name: str               # the probe's name and the machine-name prefix: "cuda"
    label: str              # as people write it: "CUDA", "ROCm"
    device: str             # torch device string ("cuda:0" on ROCm too: torch reuses torch.cuda)
    band: str               # noise band of thresholds.yaml's ``factor``: "gpu" | "cpu"
    smi: tuple[str, ...]    # the vendor's management tools, preferred first (measure/gpu_state)
    toolkit_key: str | None  # Fingerprint key with the toolkit version: "cuda", "hip"
    hatch: str              # bar hatch in the vendor chart

    @property
    def is_gpu(self) -> bool:
        return self.band == "gpu"


BACKENDS: tuple[Backend, ...] = (
    Backend("cpu", "CPU", "cpu", "cpu", (), None, ""),
    Backend("cuda", "CUDA", "cuda:0", "gpu", ("nvidia-smi",), "cuda", ""),
    Backend("rocm", "ROCm", "cuda:0", "gpu", ("amd-smi", "rocm-smi"), "hip", "//"),
)

BACKEND_BY_NAME: Mapping[str, Backend] = MappingProxyType({b.name: b for b in BACKENDS})
#: Names of the GPU backends, in table order.
GPU_BACKENDS: frozenset[str] = frozenset(b.name for b in BACKENDS if b.is_gpu)
#: The backend every other GPU backend is set beside (ratios are other / reference).
VENDOR_REFERENCE = "cuda"


def backend(name: str) -> Backend:
    try:
        return BACKEND_BY_NAME[name]
    except KeyError:
        raise UnknownNameError("backend", name, BACKEND_BY_NAME) from None


def backend_from_machine(machine: str) -> str:
    """The backend a machine name's prefix says (``rocm-mi300x`` -> rocm); ``cpu`` when
    no GPU backend's prefix matches (a machine named by hand, ``VLMPATH_MACHINE``)."""
    for b in BACKENDS:
        if b.is_gpu and machine.lower().startswith(b.name + "-"):
            return b.name
    return "cpu"


def noise_band(name: str | None) -> str:
    """The noise band (``gpu``/``cpu``) a backend's timings are judged with; ``cpu`` for a
    name the table does not know (a machine named by hand)."""
    b = BACKEND_BY_NAME.get(name or "")
    return b.band if b is not None else "cpu"


def is_gpu(name: str | None) -> bool:
    b = BACKEND_BY_NAME.get(name or "")
    return b is not None and b.is_gpu


def vendor_backends(rows: Sequence[Backend] = BACKENDS) -> tuple[Backend, ...]:
    """The GPU backends of ``rows`` the vendor comparison sets side by side: the reference
    first, then the others in table order (none when the reference is not among them)."""
    gpus = [b for b in rows if b.is_gpu]
    ref = [b for b in gpus if b.name == VENDOR_REFERENCE]
    return tuple(ref + [b for b in gpus if b.name != VENDOR_REFERENCE]) if ref else ()


def label_of(name: str, rows: Sequence[Backend] = BACKENDS) -> str:
    """How people write a backend (``rocm`` -> ROCm); a name no row has is upper-cased."""
    return next((b.label for b in rows if b.name == name), name.upper())


def gpu_labels() -> str:
    """``CUDA or ROCm``: for messages that ask for a GPU."""
    return " or ".join(b.label for b in BACKENDS if b.is_gpu)
