"""Which of vLLM's model runners does an engine case drive, and why?

A vLLM release from 0.15 has two model runners with a multimodal embedding path: v1
(``vllm/v1/worker/gpu_model_runner.py`` ``GPUModelRunner``; on a CPU its subclass
``cpu_model_runner.CPUModelRunner``, which keeps the embedding methods) and v2
(``vllm/v1/worker/gpu/model_runner.py``, whose ``EncoderRunner`` holds the embedding path;
on a CPU ``v1/worker/cpu/model_runner.py``). The worker builds one of the two from
``VllmConfig.use_v2_model_runner`` (``v1/worker/gpu_worker.py`` and ``cpu_worker.py``
``Worker.__init__``/``init_device``).

``choose(api, asked)`` gives ``(runner, why)``:

- ``server`` (the default): the runner the release's own server picks on this device,
  from the engine's own decision: ``VllmConfig().use_v2_model_runner`` where the release
  has that property (0.33: ``VLLM_USE_V2_MODEL_RUNNER`` when set, else v1 without Triton
  on a specified platform, else v1 when ``_get_v2_model_runner_unsupported_features()``
  names something, else v2), else ``vllm.envs.VLLM_USE_V2_MODEL_RUNNER`` (what the
  releases before the property read in ``Worker.__init__``: v2 opt-in, default off), else
  the one runner the release has. ``why`` names the input that decided, read from the same
  inputs the property reads (never a second copy of the rule: where they do not explain its
  answer, ``why`` says only that the property answered);
- ``v1`` / ``v2``: that runner, where the release has it; otherwise one ``EngineOptionError``
  naming the release and the runners it has (the CLI exits 2).
"""

from __future__ import annotations

from vlmpath.core.errors import EngineOptionError

FLAG = "--vllm-runner"


def _property_why(use_v2: bool, config) -> str:
    """Which of ``use_v2_model_runner``'s inputs gave its answer (0.33's property)."""
    import vllm.envs as envs

    env = getattr(envs, "VLLM_USE_V2_MODEL_RUNNER", None)
    if env is not None and bool(env) == use_v2:
        return f"VLLM_USE_V2_MODEL_RUNNER={int(bool(env))}"
    try:
        from vllm.triton_utils import HAS_TRITON
    except ImportError:
        HAS_TRITON = None
    unsupported = getattr(config, "_get_v2_model_runner_unsupported_features", lambda: [])()
    if not use_v2 and HAS_TRITON is False:
        return "no Triton"
    if not use_v2 and unsupported:
        return "v2 lacks " + ", ".join(map(str, unsupported))
    if use_v2 and HAS_TRITON and not unsupported:
        return "its default"
    return "VllmConfig.use_v2_model_runner"  # its answer, from inputs not read here (HiSparse, ...)


def server_choice(api) -> tuple[str, str]:
    """(runner, why) of the release's own server on this device (see the module docstring)."""
    if api.runners != ("v1", "v2"):
        return api.runners[-1], f"its only runner in vllm {api.version}"
    from vllm.config import VllmConfig

    if isinstance(getattr(VllmConfig, "use_v2_model_runner", None), property):
        config = VllmConfig()  # a default server's config (TP=1), as vllm_server_state builds it
        use_v2 = bool(config.use_v2_model_runner)
        return ("v2" if use_v2 else "v1"), _property_why(use_v2, config)
    import vllm.envs as envs

    use_v2 = bool(getattr(envs, "VLLM_USE_V2_MODEL_RUNNER", False))
    return ("v2" if use_v2 else "v1"), ("VLLM_USE_V2_MODEL_RUNNER=1" if use_v2
                                        else "VLLM_USE_V2_MODEL_RUNNER unset: v2 is opt-in")


def choose(api, asked: str) -> tuple[str, str]:
    """(the runner to drive, why), for ``asked`` ``server``, ``v1`` or ``v2``."""
    if asked == "server":
        runner, why = server_choice(api)
        return runner, f"server's choice: {why}"
    if asked not in api.runners:
        raise EngineOptionError(f"{FLAG} {asked}: vllm {api.version} has no {asked} model runner with an embedding "
                                f"path the adapter drives (it has {', '.join(api.runners)}); "
                                f"use {FLAG} {' or '.join(api.runners)} or server")
    server = server_choice(api)[0] if len(api.runners) > 1 else None
    return asked, f"asked: {FLAG} {asked}" + (f"; the server's choice here: {server}" if server else "")


def label(runner: str, why: str) -> str:
    """The record's ``runner`` seam, e.g. ``v1 (server's choice: no Triton)``."""
    return f"{runner} ({why})"
