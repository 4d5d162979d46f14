"""How does a chart's axis say what its values are, in a unit a person reads?

The axis decisions every bar chart shares: a log scale when a series spans more than
``LOG_SPAN`` (one workload, ``cache_reuse``, dwarfs the rest; a forwarded hash's ~40 us
beside a re-hash's ~50 ms must not look missing), time in ns/us/ms/s instead of raw
seconds, the x axis named after the parameter it groups by (the hash chart's sizes are
feature sizes, not workloads), the spread drawn on each bar, and which strategy is the
default pipeline's and which the legacy one's (``engines.pipelines``).
"""

from __future__ import annotations

from collections.abc import Sequence

from vlmpath.compare.records import Metric
from vlmpath.core.asv_names import strip_kind
from vlmpath.engines.pipelines import DEFAULT_PIPELINE, LEGACY_PIPELINE
from vlmpath.render.fmt import time_scale

#: A series whose largest value is more than this times its smallest gets a log axis.
LOG_SPAN = 30.0
#: The x-axis words of a grouping parameter; other names are shown as they are.
GROUP_LABELS = {"preset": "workload", "workload": "workload", "size_mib": "feature size (MiB)"}
# What a benchmark's leaf measures, in words (asv names them time_inject, track_syncs).
_LEAF_WORDS = {"inject": "time per injection step", "count": "time per token count",
               "receive": "receiver time per item", "routine": "routine time per schedule",
               "tok_per_s": "throughput", "copy_bandwidth": "plain-copy bandwidth",
               "hash_s": "hash time", "syncs": "host syncs", "encoder_calls": "vision-tower calls"}


def use_log(values: Sequence[float]) -> bool:
    """True when the positive values span more than ``LOG_SPAN``."""
    pos = [v for v in values if v is not None and v > 0]
    return len(pos) >= 2 and max(pos) / min(pos) > LOG_SPAN


def axis_unit(unit: str, values: Sequence[float]) -> tuple[float, str]:
    """(divide by, unit shown): seconds become the largest of s/ms/µs/ns below the
    biggest value; every other unit stays as it is."""
    if unit != "seconds":
        return 1.0, unit
    return time_scale(max((abs(v) for v in values if v is not None), default=1.0))


def group_label(params: Sequence[tuple[str, str]]) -> str:
    """The x-axis label of a chart grouped like ``split_params`` groups ``params``."""
    names = [k for k, _ in params]
    key = next((k for k in ("workload", "preset") if k in names), names[-1] if len(names) >= 2 else "")
    return GROUP_LABELS.get(key, key or "case")


def measure_label(benchmark: str, unit: str) -> str:
    leaf = strip_kind(benchmark.rsplit(".", 1)[-1])
    return _LEAF_WORDS.get(leaf, leaf.replace("_", " "))


def role_of(strategy: str) -> str:
    """``default`` / ``legacy`` when the strategy is the named pipeline's, else ``""``."""
    if strategy in ("default", *DEFAULT_PIPELINE.to_dict().values()):
        return "default"
    if strategy in ("legacy", *LEGACY_PIPELINE.to_dict().values()):
        return "legacy"
    return ""


def strategy_label(strategy: str) -> str:
    if strategy == "(default)":  # ``split_params``' word for a benchmark with no strategy parameter
        return "one series (no strategy parameter)"
    role = role_of(strategy)
    return f"{strategy} ({role})" if role and role != strategy else strategy


def draw_spread(ax, x: float, m: Metric, factor: float) -> float:
    """The samples' range (else asv's 99% interval) as an error bar on the bar at ``x``;
    returns the top of what was drawn, where the bar's label goes."""
    value = m.value / factor
    lo_hi = (min(m.samples), max(m.samples)) if len(m.samples) > 1 else m.ci_99
    if lo_hi is None:
        return value
    lo, hi = lo_hi[0] / factor, lo_hi[1] / factor
    ax.errorbar([x], [value], yerr=[[max(value - lo, 0.0)], [max(hi - value, 0.0)]], fmt="none",
                ecolor="black", elinewidth=1.0, capsize=2.5, zorder=4)
    return max(value, hi)
