"""How is a trace of real traffic replayed as a workload?

Trace format, one JSON object per line::

    {"arrival": 0, "segments": [{"text": 20}, {"image": [448, 448]}, {"text": 8}]}

A segment is ``{"text": n}`` (n text tokens), ``{"image": [height_px, width_px]}``,
``{"image_grid": [t, h, w]}`` (patches), ``{"video_grid": [t, h, w]}`` or
``{"regions": [[h, w], ...]}`` (one MiniCPM-like item with one 64-token span per region).
Requests are replayed in ``arrival`` order. Limits (``vlmpath.core.validate``): every
number at most 1,000,000 (booleans are not numbers), at most 10,000 requests and 64 MiB per
file, UTF-8; per scale, vision patches per item (tiny 4096: a 896 x 896 px image; full
65536), prefill tokens per request (tiny 32768, full 262144) and in all.
``workload_by_name("trace:<path>")`` loads a trace by name, like a preset.
"""

from __future__ import annotations

import json
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.core.validate import (
    LIMITS,
    MAX_TRACE_BYTES,
    MAX_TRACE_REQUESTS,
    check_input_file,
    check_int,
    check_number,
)
from vlmpath.measure.workload import (
    REGION_SEPARATOR,
    REGION_TOKENS,
    SHAPES,
    MediaSpec,
    RequestSpec,
    Workload,
    build_requests,
    build_workload,
    check_grid,
    check_scale,
    grid_for_image,
    tokens_of_grid,
)


def _px(val, what: str) -> tuple[int, int]:
    if not (isinstance(val, list) and len(val) == 2):
        raise VlmpathError(f"{what} is [height_px, width_px], got {val!r}")
    return (check_int(val[0], f"{what} height", lo=1), check_int(val[1], f"{what} width", lo=1))


def parse_trace_line(line: str, where: str) -> tuple[float, RequestSpec]:
    """One trace line to ``(arrival, spec)``; ``where`` ("file:line") goes into errors.
    Every number is checked (no booleans, at most ``MAX_TRACE_INT``) before any use."""
    fix = ('expected {"arrival": 0, "segments": [{"text": 20}, {"image": [448, 448]}, ...]}')
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise VlmpathError(f"{where}: not valid JSON ({msg}); {fix}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("segments"), list):
        raise VlmpathError(f"{where}: missing 'segments' list; {fix}")
    arrival = check_number(obj.get("arrival", 0), f"{where}: 'arrival'")
    segs: list[int | MediaSpec] = []
    for k, seg in enumerate(obj["segments"]):
        here = f"{where} segment {k}"
        if not isinstance(seg, dict) or len(seg) != 1:
            raise VlmpathError(f"{here}: each segment is an object with one key "
                               f"(text, image, image_grid, video_grid, regions), got {str(seg)[:80]}")
        (kind, val), = seg.items()
        if kind == "text":
            segs.append(check_int(val, f"{here}: text length"))
        elif kind == "image":
            segs.append(MediaSpec("image", (grid_for_image(*_px(val, f"{here}: image")),)))
        elif kind in ("image_grid", "video_grid"):
            grid = check_grid(val if isinstance(val, list) else [val], here)
            for v in grid:
                check_int(v, f"{here}: each {kind} value", lo=1)
            segs.append(MediaSpec(kind.split("_")[0], (grid,)))
        elif kind == "regions":
            if not (isinstance(val, list) and 0 < len(val) <= 64):
                raise VlmpathError(f"{here}: regions is a non-empty list of at most 64 [height_px, width_px]")
            grids = tuple(grid_for_image(*_px(r, f"{here}: region {j}")) for j, r in enumerate(val))
            segs.append(MediaSpec("image", grids, regions=True))
        else:
            raise VlmpathError(f"{here}: unknown segment kind {str(kind)[:40]!r}: use text, image, "
                               "image_grid, video_grid or regions")
    return arrival, RequestSpec(tuple(segs))


def check_trace_size(specs: list[RequestSpec], scale: str, where: str) -> None:
    """Refuse a trace over the scale's stated limits (``vlmpath.core.validate.LIMITS``)."""
    lim = LIMITS[check_scale(scale)]
    fix = f"stay within the {scale} limits, or use --scale full on a GPU" if scale == "tiny" else \
        "split the trace"
    total_tokens = total_patches = 0
    for n, spec in enumerate(specs):
        tokens = 0
        for seg in spec.segments:
            if isinstance(seg, int):
                tokens += seg
                continue
            patches = sum(t * h * w for t, h, w in seg.grids)
            if patches > lim.item_patches:
                raise VlmpathError(f"{where}: request {n} has an item of {patches} vision patches, over "
                                   f"the {scale} limit of {lim.item_patches} per item; {fix}")
            total_patches += patches
            tokens += ((REGION_TOKENS + REGION_SEPARATOR) * len(seg.grids) - REGION_SEPARATOR
                       if seg.regions else sum(tokens_of_grid(g) for g in seg.grids))
        if tokens > lim.request_tokens:
            raise VlmpathError(f"{where}: request {n} has {tokens} prefill tokens, over the {scale} "
                               f"limit of {lim.request_tokens}; {fix}")
        total_tokens += tokens
    if total_tokens > lim.trace_tokens or total_patches > lim.trace_patches:
        raise VlmpathError(f"{where}: {total_tokens} prefill tokens and {total_patches} vision patches "
                           f"in all, over the {scale} limits of {lim.trace_tokens} tokens and "
                           f"{lim.trace_patches} patches; {fix}")


def parse_trace_bytes(data: bytes, name: str) -> list[RequestSpec]:
    """A trace's bytes to its request specs in arrival order; ``VlmpathError`` otherwise."""
    if len(data) > MAX_TRACE_BYTES:
        raise VlmpathError(f"trace file {name!r} is {len(data)} bytes, over the limit of "
                           f"{MAX_TRACE_BYTES}; split it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise VlmpathError(f"{name}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                           f"{exc.start}); save the trace as UTF-8 JSON Lines") from None
    rows: list[tuple[float, int, RequestSpec]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            if len(rows) >= MAX_TRACE_REQUESTS:
                raise VlmpathError(f"trace file {name!r} holds more than {MAX_TRACE_REQUESTS} "
                                   "requests; split it")
            arrival, spec = parse_trace_line(line, f"{name}:{n}")
            rows.append((arrival, n, spec))
    if not rows:
        raise VlmpathError(f"trace file {name!r} holds no requests")
    rows.sort(key=lambda r: (r[0], r[1]))
    return [s for _, _, s in rows]


def read_trace(path: str | Path, scale: str | None = None) -> list[RequestSpec]:
    """A JSONL trace's request specs in arrival order (cheap: builds no features); with a
    ``scale``, also checked against that scale's size limits."""
    path = check_input_file(path, "trace file", 'pass trace:FILE.jsonl, one {"segments": [...]} per line')
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise VlmpathError(f"cannot read trace file {str(path)!r} ({exc.strerror}); check the path") from None
    specs = parse_trace_bytes(data, str(path))
    if scale is not None:
        check_trace_size(specs, scale, str(path))
    return specs


def load_trace(path: str | Path, scale: str = "tiny", seed: int = 0,
               chunk_size: int | None = None) -> Workload:
    """Replay a JSONL trace (see the module docstring) as a workload. A trace with any
    ``regions`` item runs on the multi-region encoder, which routes its plain images and
    videos straight through the tower (rows per grid), as an engine serving both does."""
    path = Path(path)
    specs = read_trace(path, scale)
    shapes = SHAPES[check_scale(scale)]
    model = "multi_region" if any(isinstance(m, MediaSpec) and m.regions for s in specs for m in s.segments) else "qwen2_5_vl"
    requests = build_requests(specs, shapes.vocab, seed)
    return build_workload(f"trace:{path.stem}", scale, model, requests,
                          shapes.chunk if chunk_size is None else chunk_size, shapes.vocab, seed)
