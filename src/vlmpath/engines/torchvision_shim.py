"""How does a CUDA-built torchvision wheel import next to a CPU-only torch (light engine envs)?

Why this exists: sglang imports ``torchvision.transforms`` unguarded
(``sglang/srt/multimodal/internvl_utils.py``). The package index's Linux torchvision wheels
link their ``_C.so`` against ``libc10_cuda.so``/``libtorch_cuda.so``; with the CPU build of
torch that library cannot load, and torchvision then has no ops. Every fake registration in
``torchvision/_meta_registrations.py`` is guarded by ``_has_ops()`` except
``torchvision::nms`` and ``torchvision::qnms``, which fail the import with
``RuntimeError: operator torchvision::nms does not exist``.

``ensure_torchvision_importable()`` first tries to load the real ``_C.so`` and does nothing
if it loads (a GPU env, or a matching build). Otherwise it defines only those two schemas
(no kernels), so the real torchvision Python code imports and ``transforms`` work; the
compiled ops (nms, roi_align, image decode) stay unavailable, and sglang's embedding path
never calls them. Call it before anything imports torchvision or sglang. Our own code.
"""

from __future__ import annotations

import importlib.util
import os

import torch

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
# The Library object must outlive the call: torch drops its definitions when it is
# collected. One per process, created only when the schemas are missing.
_KEEP: list = []


def _defined(name: str) -> bool:
    try:
        torch._C._dispatch_has_kernel_for_dispatch_key(f"torchvision::{name}", "Meta")
        return True
    except RuntimeError:
        return False


def ensure_torchvision_importable() -> list[str]:
    """The schemas defined here (empty when torchvision's own ``_C`` loads or is absent)."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return []
    so = os.path.join(os.path.dirname(spec.origin), "_C.so")
    if os.path.exists(so):
        try:
            torch.ops.load_library(so)
            return []
        except OSError:
            pass  # the CUDA-built extension against a CPU torch: define the two schemas
    defined = []
    for name, schema in _SCHEMAS.items():
        if not _defined(name):
            if not _KEEP:
                _KEEP.append(torch.library.Library("torchvision", "FRAGMENT"))
            _KEEP[0].define(schema)
            defined.append(name)
    return defined
