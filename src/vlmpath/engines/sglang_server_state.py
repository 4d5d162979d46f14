"""What does sglang's own server set up before its embedding code runs, at TP=1 on this device?

A server's scheduler process publishes its server args and builds the distributed
environment and model-parallel groups before the first request; code in the embedding path
may read any of them (``get_tensor_model_parallel_world_size()``, ``get_tp_group()``, the
global server args). ``SglangServerState`` sets up what a default VLM server at
tensor-parallel size 1 holds, found in the release by inspection, and takes all of it down
again (``close``), in reverse order:

- *server args*: ``ServerArgs(model_path=DIR, device=...)``, DIR holding transformers'
  default Qwen2.5-VL config (the values a default Qwen2.5-VL server resolves; nothing from a
  model hub). Published as the release's scheduler does:
  - ``runtime_context`` (0.5.2x): ``run_scheduler_process``'s ``publish(server_args,
    role="scheduler", ranks=SpawnRanks(...))``, here into a context of its own
    (``create_context``) made current with ``use_context``, so the process's own context is
    back as it was after ``close``;
  - ``publish`` into the process-wide context (0.5.21: no ``create_context``), its
    ``snapshot_context`` put back with ``restore_context`` on ``close``;
  - ``set_global_server_args_for_scheduler`` (earlier 0.5): as ``run_scheduler_process`` calls
    it; the previous value is put back;
  - ``global_server_args_dict`` (older): ``Scheduler.__init__``'s update of that dict from the
    server args; its previous contents are put back;
- *groups*: ``parallel_state.init_distributed_environment`` (world size 1, rank 0, the
  device's default backend: gloo on a CPU; a file rendezvous, no port) and
  ``initialize_model_parallel`` (TP=1, PP=1), as the scheduler's model runner builds them
  (0.5.23: ``distributed.bootstrap._init_parallel_groups``; earlier:
  ``ModelRunner.init_torch_distributed``), then ``initialize_dp_attention(server_args)``
  where the release takes it that way (0.5.23's ``_init_parallel_groups`` calls it next).
  Taken down with ``destroy_model_parallel`` and ``destroy_distributed_environment``. Groups
  somebody else built in this process are used, never replaced or destroyed.

``what`` says which pieces were set up (recorded as the seam ``server_state``).
"""

from __future__ import annotations

import importlib
import inspect
import tempfile
from contextlib import ExitStack
from pathlib import Path

import torch

from vlmpath.core.errors import EngineError

QWEN25_VL_ARCH = "Qwen2_5_VLForConditionalGeneration"


def _optional(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def default_vlm_model_dir(root: Path) -> str:
    """A model directory holding only transformers' default Qwen2.5-VL config."""
    from transformers import Qwen2_5_VLConfig

    Qwen2_5_VLConfig(architectures=[QWEN25_VL_ARCH]).save_pretrained(root)
    return str(root)


#: The modules whose absence means the tree has no server (not a broken set-up).
_NO_SERVER = ("sglang.srt.server_args", "sglang.srt.distributed")


class SglangServerState:
    """The TP=1 server state around the adapter's routines (see the module docstring)."""

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self.what: list[str] = []
        self._stack = ExitStack()
        try:
            tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="vlmpath-sglang-server-")))
            self.server_args = self._server_args(tmp)
            self.what.append(self._publish())
            self.what.extend(self._groups(tmp))
        except ModuleNotFoundError as exc:
            self._stack.close()
            if exc.name not in _NO_SERVER:
                raise EngineError(f"sglang's TP=1 server state could not be set up ({type(exc).__name__}: {exc}); "
                                  "the adapter runs the engine's path only as its server would") from exc
            # A tree with an embedding path but no server at all (a stripped-down test
            # tree): nothing a server would set up exists to set up; the record says so.
            self.what = [f"none (no {exc.name} in this tree)"]
        except Exception as exc:
            self._stack.close()
            if isinstance(exc, EngineError):
                raise
            raise EngineError(f"sglang's TP=1 server state could not be set up ({type(exc).__name__}: {exc}); "
                              "the adapter runs the engine's path only as its server would") from exc

    @property
    def seam(self) -> str:
        return "+".join(self.what) or "none"

    def close(self) -> None:
        self._stack.close()

    # --- server args -------------------------------------------------------------------------
    def _server_args(self, tmp: Path):
        from sglang.srt.server_args import ServerArgs

        model = default_vlm_model_dir(tmp / "model")
        args = ServerArgs(model_path=model, device=self.device.type)
        if hasattr(args, "resolve_once"):  # 0.5.2x resolves lazily; publish would do it too
            args.resolve_once()
        return args

    def _publish(self) -> str:
        args = self.server_args
        rc = _optional("sglang.srt.runtime_context")
        if rc is not None and hasattr(rc, "create_context") and hasattr(rc, "use_context"):
            gpu = self.device.index or 0
            ranks = rc.SpawnRanks(world_rank=0, dp_rank=None, gpu_id=gpu)
            self._stack.enter_context(rc.use_context(rc.create_context(args, role="scheduler", ranks=ranks)))
            return "runtime_context.publish(scheduler)"
        if rc is not None and "ranks" in inspect.signature(getattr(rc, "publish", lambda: None)).parameters \
                and hasattr(rc, "snapshot_context") and hasattr(rc, "restore_context"):
            # 0.5.21: one process-wide context, no create/use: published into it as
            # run_scheduler_process does, and put back from its own snapshot on close.
            before = rc.snapshot_context()
            self._stack.callback(rc.restore_context, before)
            rc.publish(args, role="scheduler", ranks=rc.SpawnRanks(world_rank=0, dp_rank=None,
                                                                   gpu_id=self.device.index or 0))
            return "runtime_context.publish(scheduler, process-wide)"
        sa = importlib.import_module("sglang.srt.server_args")
        setter = getattr(sa, "set_global_server_args_for_scheduler", None)
        if setter is not None:
            before = getattr(sa, "_global_server_args", None)
            setter(args)
            self._stack.callback(setattr, sa, "_global_server_args", before)
            return "set_global_server_args_for_scheduler"
        sb = importlib.import_module("sglang.srt.managers.schedule_batch")
        table = getattr(sb, "global_server_args_dict", None)
        if isinstance(table, dict):
            before = dict(table)
            keys = getattr(sb, "GLOBAL_SERVER_ARGS_KEYS", list(table))
            table.update({k: getattr(args, k) for k in keys if hasattr(args, k)})

            def restore():
                table.clear()
                table.update(before)

            self._stack.callback(restore)
            return "global_server_args_dict"
        return "no_global_server_args"

    # --- distributed environment and groups ---------------------------------------------------
    def _groups(self, tmp: Path) -> list[str]:
        ps = importlib.import_module("sglang.srt.distributed.parallel_state")
        if torch.distributed.is_initialized() or ps.model_parallel_is_initialized():
            return ["groups_already_built"]
        pick = getattr(ps, "get_default_distributed_backend", None)
        backend = pick(self.device.type) if pick else ("gloo" if self.device.type == "cpu" else "nccl")
        ps.init_distributed_environment(backend=backend, world_size=1, rank=0, local_rank=self.device.index or 0,
                                        distributed_init_method=f"file://{tmp / 'rendezvous'}")
        self._stack.callback(ps.destroy_distributed_environment)
        params = inspect.signature(ps.initialize_model_parallel).parameters
        widths = {k: 1 for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size") if k in params}
        ps.initialize_model_parallel(**widths)
        self._stack.callback(ps.destroy_model_parallel)  # runs first: groups before the world
        done = [f"groups(tp=1,{backend})"]
        dp = getattr(_optional("sglang.srt.layers.dp_attention"), "initialize_dp_attention", None)
        if dp is not None and list(inspect.signature(dp).parameters) == ["server_args"]:
            dp(server_args=self.server_args)
            done.append("dp_attention")
        return done
