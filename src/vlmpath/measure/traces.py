"""How is a trace of real traffic replayed as a workload?

Trace format, one JSON object per line::

    {"arrival": 0, "segments": [{"text": 20}, {"image": [448, 448]}, {"text": 8}]}

A segment is ``{"text": n}`` (n text tokens), ``{"image": [height_px, width_px]}``,
``{"image_grid": [t, h, w]}`` (patches), ``{"video_grid": [t, h, w]}`` or
``{"regions": [[h, w], ...]}`` (one MiniCPM-like item with one 64-token span per region).
Requests are replayed in ``arrival`` order.
``workload_by_name("trace:<path>")`` loads a trace by name, like a preset.
"""

from __future__ import annotations

import json
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.measure.workload import (
    SHAPES,
    MediaSpec,
    RequestSpec,
    Workload,
    build_requests,
    build_workload,
    check_grid,
    check_scale,
    grid_for_image,
)


def parse_trace_line(line: str, where: str) -> tuple[int, RequestSpec]:
    """One trace line to ``(arrival, spec)``; ``where`` ("file:line") goes into errors."""
    fix = ('expected {"arrival": 0, "segments": [{"text": 20}, {"image": [448, 448]}, ...]}')
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise VlmpathError(f"{where}: not valid JSON ({exc.msg}); {fix}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("segments"), list):
        raise VlmpathError(f"{where}: missing 'segments' list; {fix}")
    arrival = obj.get("arrival", 0)
    if not isinstance(arrival, (int, float)):
        raise VlmpathError(f"{where}: 'arrival' must be a number; {fix}")
    segs: list[int | MediaSpec] = []
    for k, seg in enumerate(obj["segments"]):
        here = f"{where} segment {k}"
        if not isinstance(seg, dict) or len(seg) != 1:
            raise VlmpathError(f"{here}: each segment is an object with one key "
                               f"(text, image, image_grid, video_grid, regions), got {seg!r}")
        (kind, val), = seg.items()
        if kind == "text":
            if not isinstance(val, int) or val < 0:
                raise VlmpathError(f"{here}: text length must be a non-negative integer, got {val!r}")
            segs.append(val)
        elif kind == "image":
            if not (isinstance(val, list) and len(val) == 2 and all(isinstance(v, int) and v > 0 for v in val)):
                raise VlmpathError(f"{here}: image is [height_px, width_px], got {val!r}")
            segs.append(MediaSpec("image", (grid_for_image(*val),)))
        elif kind in ("image_grid", "video_grid"):
            grid = check_grid(val if isinstance(val, list) else [val], here)
            segs.append(MediaSpec(kind.split("_")[0], (grid,)))
        elif kind == "regions":
            if not (isinstance(val, list) and val):
                raise VlmpathError(f"{here}: regions is a non-empty list of [height_px, width_px]")
            grids = []
            for r in val:
                if not (isinstance(r, list) and len(r) == 2 and all(isinstance(v, int) and v > 0 for v in r)):
                    raise VlmpathError(f"{here}: each region is [height_px, width_px], got {r!r}")
                grids.append(grid_for_image(*r))
            segs.append(MediaSpec("image", tuple(grids), regions=True))
        else:
            raise VlmpathError(f"{here}: unknown segment kind {kind!r}: use text, image, "
                               "image_grid, video_grid or regions")
    return arrival, RequestSpec(tuple(segs))


def read_trace(path: str | Path) -> list[RequestSpec]:
    """A JSONL trace's request specs in arrival order (cheap: builds no features)."""
    path = Path(path)
    if not path.is_file():
        raise VlmpathError(f"trace file {str(path)!r} does not exist")
    rows: list[tuple[float, int, RequestSpec]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                arrival, spec = parse_trace_line(line, f"{path}:{n}")
                rows.append((arrival, n, spec))
    if not rows:
        raise VlmpathError(f"trace file {str(path)!r} holds no requests")
    rows.sort(key=lambda r: (r[0], r[1]))
    return [s for _, _, s in rows]


def load_trace(path: str | Path, scale: str = "tiny", seed: int = 0,
               chunk_size: int | None = None) -> Workload:
    """Replay a JSONL trace (see the module docstring) as a workload."""
    path = Path(path)
    specs = read_trace(path)
    shapes = SHAPES[check_scale(scale)]
    model = "multi_region" if any(isinstance(m, MediaSpec) and m.regions for s in specs for m in s.segments) else "qwen2_5_vl"
    requests = build_requests(specs, shapes.vocab, seed)
    return build_workload(f"trace:{path.stem}", scale, model, requests,
                          shapes.chunk if chunk_size is None else chunk_size, shapes.vocab, seed)
