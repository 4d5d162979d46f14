"""A planted fault in a served model's code, loaded into a scratch server process only.

``serving.launch`` puts this folder first on a server's ``PYTHONPATH`` when a run asks for
a plant (``serve-bench --plant``); Python imports ``sitecustomize`` at start-up, so the
server's own modules are patched in memory and the installed packages stay untouched.
``VLMPATH_SERVE_PLANT`` says which:

- ``shift``: Qwen2.5-VL's image features come back with each image's rows shifted by one
  (``torch.roll``), what a misplaced-row bug in the embedding path does;
- ``delay:S``: every ``generate`` call of the model sleeps S seconds first, a slowdown of
  known size in the request path (the server generates one request at a time);
- ``exit:N``: the server process exits (code 3) at its N+1-th ``generate`` call, a server
  that dies mid-run.
"""

from __future__ import annotations

import functools
import os
import time


def _shift() -> None:
    import torch
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as q

    orig = q.Qwen2_5_VLModel.get_image_features

    @functools.wraps(orig)  # generate() reads the signature to route pixel_values
    def shifted(self, *args, **kwargs):
        out = orig(self, *args, **kwargs)
        out.pooler_output = tuple(torch.roll(rows, 1, 0) for rows in out.pooler_output)
        return out

    q.Qwen2_5_VLModel.get_image_features = shifted


def _delay(seconds: float) -> None:
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as q

    orig = q.Qwen2_5_VLForConditionalGeneration.generate

    @functools.wraps(orig)
    def slowed(self, *args, **kwargs):
        time.sleep(seconds)
        return orig(self, *args, **kwargs)

    q.Qwen2_5_VLForConditionalGeneration.generate = slowed


def _exit_after(n: int) -> None:
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as q

    orig = q.Qwen2_5_VLForConditionalGeneration.generate
    calls = [0]

    @functools.wraps(orig)
    def dying(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] > n:
            os._exit(3)
        return orig(self, *args, **kwargs)

    q.Qwen2_5_VLForConditionalGeneration.generate = dying


def _install(spec: str) -> None:
    if spec == "shift":
        _shift()
    elif spec.startswith("delay:"):
        _delay(float(spec.split(":", 1)[1]))
    elif spec.startswith("exit:"):
        _exit_after(int(spec.split(":", 1)[1]))


_install(os.environ.get("VLMPATH_SERVE_PLANT", ""))
