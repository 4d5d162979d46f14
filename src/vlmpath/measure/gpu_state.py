"""In what state was the GPU when a run was measured: clocks, power limit, modes, ECC?

Many "regressions" on shared GPU boxes are a changed application clock, a lowered power
cap or persistence mode switched off between two runs. ``query_gpu_state`` asks the
vendor tool that is present (the tools are the backend table's, ``Backend.smi``; how each
is asked and read is ``READERS``) and parses its machine-readable output into a ``GpuState``:

- NVIDIA: ``nvidia-smi -q -x`` (XML, ``nvidia_smi_log/gpu``): ``clocks``,
  ``applications_clocks``, ``max_clocks`` (``graphics_clock``, ``sm_clock``,
  ``mem_clock``, "1980 MHz"), ``gpu_power_readings/current_power_limit`` (older drivers:
  ``power_readings/power_limit``), ``persistence_mode``, ``performance_state``,
  ``ecc_mode/current_ecc``, ``compute_mode``;
- AMD: ``amd-smi static --json`` and ``amd-smi metric --json`` (a list of per-GPU objects,
  newer releases wrap it in ``{"gpu_data": [...]}``): ``clock.gfx_0`` / ``clock.mem_0``
  (``clk``, ``max_clk``: ``{"value", "unit"}``), ``perf_level``, ``limit`` (power cap),
  ``ras.ecc_block_state.UMC``; else ``rocm-smi --showclocks --showmaxpower
  --showperflevel --json`` (``card0``: "sclk clock speed:": "(1900Mhz)", ...).

``SETTING_FIELDS`` are what an operator sets and what must match between base and head
(the comparison flags a change like a toolchain change); the current clocks and the
performance state are readings (an idle GPU sits at P8 and a low clock), recorded but
not compared. A missing tool, a failing one or unreadable output gives None: the
fingerprint then has no GPU state, and nothing fails.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from types import MappingProxyType
from typing import Any

from vlmpath.core.backends import BACKENDS, Backend

#: What an operator sets; compared between base and head.
SETTING_FIELDS = ("app_graphics_clock_mhz", "app_mem_clock_mhz", "max_sm_clock_mhz", "max_mem_clock_mhz",
                  "power_limit_w", "persistence_mode", "perf_level", "ecc_mode", "compute_mode")


@dataclass(frozen=True)
class GpuState:
    """One GPU's clocks, power limit and modes (None: the tool does not report it)."""

    tool: str                                  # "nvidia-smi" | "amd-smi" | "rocm-smi"
    sm_clock_mhz: float | None = None          # current (reading)
    mem_clock_mhz: float | None = None         # current (reading)
    performance_state: str | None = None       # NVIDIA P-state now (reading)
    app_graphics_clock_mhz: float | None = None
    app_mem_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    max_mem_clock_mhz: float | None = None
    power_limit_w: float | None = None
    persistence_mode: str | None = None
    perf_level: str | None = None              # AMD performance level (auto/manual/...)
    ecc_mode: str | None = None
    compute_mode: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuState:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def settings(self) -> dict[str, str]:
        """The compared fields that the tool reported, as strings."""
        return {k: _text(getattr(self, k)) for k in SETTING_FIELDS if getattr(self, k) is not None}


def _text(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _number(text: Any) -> float | None:
    """``"1980 MHz"`` / ``"(1900Mhz)"`` / ``700.00 W`` / ``{"value": 750}`` -> float; N/A -> None."""
    if isinstance(text, Mapping):
        text = text.get("value")
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    m = _NUMBER.search(str(text or ""))
    return float(m.group()) if m else None


# --- NVIDIA ------------------------------------------------------------------------------

def parse_nvidia_smi_xml(text: str, index: int = 0) -> GpuState | None:
    """The ``index``-th ``<gpu>`` of ``nvidia-smi -q -x`` output; None if there is none."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    gpus = root.findall("gpu")
    if len(gpus) <= index:
        return None
    g = gpus[index]

    def get(path: str) -> str | None:
        el = g.find(path)
        v = el.text.strip() if el is not None and el.text else None
        return None if v in (None, "", "N/A", "[N/A]", "Not Supported", "[Not Supported]") else v

    power = get("gpu_power_readings/current_power_limit") or get("power_readings/power_limit")
    return GpuState(
        tool="nvidia-smi",
        sm_clock_mhz=_number(get("clocks/sm_clock")),
        mem_clock_mhz=_number(get("clocks/mem_clock")),
        performance_state=get("performance_state"),
        app_graphics_clock_mhz=_number(get("applications_clocks/graphics_clock")),
        app_mem_clock_mhz=_number(get("applications_clocks/mem_clock")),
        max_sm_clock_mhz=_number(get("max_clocks/sm_clock")),
        max_mem_clock_mhz=_number(get("max_clocks/mem_clock")),
        power_limit_w=_number(power),
        persistence_mode=get("persistence_mode"),
        ecc_mode=get("ecc_mode/current_ecc"),
        compute_mode=get("compute_mode"),
    )


# --- AMD ---------------------------------------------------------------------------------

def _gpu_list(data: Any) -> list[dict]:
    if isinstance(data, Mapping) and isinstance(data.get("gpu_data"), list):
        data = data["gpu_data"]
    if isinstance(data, Mapping):
        data = [data]
    return [d for d in data if isinstance(d, Mapping)] if isinstance(data, list) else []


def _pick(gpus: list[dict], index: int) -> dict:
    return next((g for g in gpus if g.get("gpu") == index), gpus[index] if len(gpus) > index else {})


def _dig(d: Any, *path: str) -> Any:
    for k in path:
        d = d.get(k) if isinstance(d, Mapping) else None
    return d


def _power_cap(limit: Any) -> float | None:
    """amd-smi's power cap: ``limit.max_power`` (6.x), ``limit.socket_power_limit`` or
    ``limit.ppt0.socket_power_limit`` (newer)."""
    for path in (("max_power",), ("socket_power_limit",), ("ppt0", "socket_power_limit"), ("power_cap",)):
        v = _number(_dig(limit, *path))
        if v is not None:
            return v
    return None


def parse_amd_smi_json(static_text: str | None, metric_text: str | None, index: int = 0) -> GpuState | None:
    """GPU ``index`` from ``amd-smi static --json`` and ``amd-smi metric --json``."""
    try:
        static = _pick(_gpu_list(json.loads(static_text)), index) if static_text else {}
        metric = _pick(_gpu_list(json.loads(metric_text)), index) if metric_text else {}
    except ValueError:
        return None
    if not static and not metric:
        return None
    level = metric.get("perf_level")
    level = str(level).removeprefix("AMDSMI_DEV_PERF_LEVEL_").lower() if level not in (None, "N/A") else None
    ecc = _dig(static, "ras", "ecc_block_state", "UMC")
    return GpuState(
        tool="amd-smi",
        sm_clock_mhz=_number(_dig(metric, "clock", "gfx_0", "clk")),
        mem_clock_mhz=_number(_dig(metric, "clock", "mem_0", "clk")),
        max_sm_clock_mhz=_number(_dig(metric, "clock", "gfx_0", "max_clk")),
        max_mem_clock_mhz=_number(_dig(metric, "clock", "mem_0", "max_clk")),
        power_limit_w=_power_cap(static.get("limit")) or _number(_dig(metric, "power", "power_limit")),
        perf_level=level,
        ecc_mode=None if ecc in (None, "N/A") else str(ecc).lower(),
    )


def parse_rocm_smi_json(text: str, index: int = 0) -> GpuState | None:
    """``card<index>`` of ``rocm-smi --showclocks --showmaxpower --showperflevel --json``."""
    try:
        card = json.loads(text).get(f"card{index}")
    except (ValueError, AttributeError):
        return None
    if not isinstance(card, Mapping):
        return None
    level = card.get("Performance Level")
    return GpuState(
        tool="rocm-smi",
        sm_clock_mhz=_number(card.get("sclk clock speed:")),
        mem_clock_mhz=_number(card.get("mclk clock speed:")),
        power_limit_w=_number(card.get("Max Graphics Package Power (W)")),
        perf_level=None if level is None else str(level).lower(),
    )


# --- asking the tools --------------------------------------------------------------------

Runner = Callable[[list[str]], "str | None"]


def _run(argv: list[str]) -> str | None:
    """stdout of a tool, or None if it fails or hangs (never raises: state is best effort)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 and proc.stdout.strip() else None


def _read_nvidia_smi(run: Runner, index: int) -> GpuState | None:
    out = run(["nvidia-smi", "-q", "-x"])
    return parse_nvidia_smi_xml(out, index) if out else None


def _read_amd_smi(run: Runner, index: int) -> GpuState | None:
    return parse_amd_smi_json(run(["amd-smi", "static", "--json"]), run(["amd-smi", "metric", "--json"]), index)


def _read_rocm_smi(run: Runner, index: int) -> GpuState | None:
    out = run(["rocm-smi", "--showclocks", "--showmaxpower", "--showperflevel", "--json"])
    return parse_rocm_smi_json(out, index) if out else None


#: How each management tool named in the backend table (``Backend.smi``) is asked and read.
#: A new backend's tool needs a reader here; ``tests/test_gpu_state.py`` checks the table
#: names no tool without one.
READERS: Mapping[str, Callable[[Runner, int], "GpuState | None"]] = MappingProxyType({
    "nvidia-smi": _read_nvidia_smi, "amd-smi": _read_amd_smi, "rocm-smi": _read_rocm_smi,
})


def table_tools(backends: Sequence[Backend] = BACKENDS) -> tuple[str, ...]:
    """The GPU backends' tools, in table order, each backend's preferred tool first."""
    return tuple(dict.fromkeys(t for b in backends if b.is_gpu for t in b.smi))


def query_gpu_state(index: int = 0, *, which: Callable[[str], str | None] = shutil.which,
                    run: Runner = _run, tools: Sequence[str] | None = None) -> GpuState | None:
    """The first tool present that answers (``tools``, default: the backend table's:
    nvidia-smi, amd-smi, rocm-smi), else None. A tool without a reader is skipped."""
    for tool in table_tools() if tools is None else tools:
        reader = READERS.get(tool)
        if reader is None or not which(tool):
            continue
        state = reader(run, index)
        if state is not None:
            return state
    return None
