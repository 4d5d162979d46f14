"""How is a trace of real traffic replayed as a workload?

Trace format, one JSON object per line, after an optional first line naming the encoder::

    {"encoder": "qwen2_5_vl"}
    {"arrival": 0, "segments": [{"text": 20}, {"image": [448, 448]}, {"text": 8}]}

The encoder's model family turns image sizes into patch grids and grids into placeholder
tokens (``encoders.family_of``); an unknown name is one error listing the encoders. A trace
without the line runs on ``qwen2_5_vl``, or on its family's regions encoder
(``multi_region``) when it has a ``regions`` item, as traces did before they named one.

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

from dataclasses import dataclass
from pathlib import Path

from vlmpath.core import safe_json
from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.core.scales import DEFAULT_SCALE, SCALES, Scale
from vlmpath.core.validate import (
    LIMITS,
    MAX_TRACE_BYTES,
    MAX_TRACE_REQUESTS,
    check_input_file,
    check_int,
    check_number,
)
from vlmpath.measure.encoders import DEFAULT_ENCODER, family_of
from vlmpath.measure.families import Family
from vlmpath.measure.workload import (
    SHAPES,
    MediaSpec,
    RequestSpec,
    Workload,
    build_requests,
    build_workload,
)


@dataclass(frozen=True)
class Trace:
    """A trace's request specs (arrival order) and the encoder they run on."""

    encoder: str
    specs: tuple[RequestSpec, ...]

    @property
    def family(self) -> Family:
        return family_of(self.encoder)


def _px(val, what: str) -> tuple[int, int]:
    if not (isinstance(val, list) and len(val) == 2):
        raise VlmpathError(f"{what} is [height_px, width_px], got {val!r}")
    return (check_int(val[0], f"{what} height", lo=1), check_int(val[1], f"{what} width", lo=1))


def _json_line(line: str, where: str, fix: str):
    # Bounded: a 5000-digit number or a 100k-deep line is one error, not a traceback.
    return safe_json.loads(line, where, fix, said="not valid JSON")


def parse_trace_line(line: str, where: str, family: Family | None = None,
                     scale: Scale = DEFAULT_SCALE) -> tuple[float, RequestSpec]:
    """One trace line to ``(arrival, spec)`` with ``family``'s arithmetic at ``scale``
    (default: the family of ``DEFAULT_ENCODER``); ``where`` ("file:line") goes into errors.
    Every number is checked (no booleans, at most ``MAX_TRACE_INT``) before any use."""
    fam = family if family is not None else family_of(DEFAULT_ENCODER)
    fix = ('expected {"arrival": 0, "segments": [{"text": 20}, {"image": [448, 448]}, ...]}')
    obj = _json_line(line, where, fix)
    if isinstance(obj, dict) and "encoder" in obj and "segments" not in obj:
        raise VlmpathError(f'{where}: an {{"encoder": NAME}} line must be the first line of the trace')
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
            segs.append(MediaSpec("image", (fam.grid_for_image(*_px(val, f"{here}: image"), scale),)))
        elif kind in ("image_grid", "video_grid"):
            grid = fam.check_grid(val if isinstance(val, list) else [val], here, scale)
            for v in grid:
                check_int(v, f"{here}: each {kind} value", lo=1)
            segs.append(MediaSpec(kind.split("_")[0], (grid,)))
        elif kind == "regions":
            if fam.region_tokens is None:
                raise VlmpathError(f"{here}: model family {fam.name!r} has no multi-region items")
            if not (isinstance(val, list) and 0 < len(val) <= 64):
                raise VlmpathError(f"{here}: regions is a non-empty list of at most 64 [height_px, width_px]")
            grids = tuple(fam.grid_for_image(*_px(r, f"{here}: region {j}"), scale) for j, r in enumerate(val))
            segs.append(MediaSpec("image", grids, regions=True))
        else:
            raise VlmpathError(f"{here}: unknown segment kind {str(kind)[:40]!r}: use text, image, "
                               "image_grid, video_grid or regions")
    return arrival, RequestSpec(tuple(segs))


def check_trace_size(trace: Trace, scale: Scale, where: str) -> None:
    """Refuse a trace over the scale's stated limits (``vlmpath.core.validate.LIMITS``)."""
    lim = LIMITS[scale]
    fam = trace.family
    gpu = [s for s in Scale if s.gpu]
    fix = (f"stay within the {scale} limits, or use --scale {gpu[0]} on a GPU"
           if gpu and not SCALES[scale].gpu else "split the trace")
    total_tokens = total_patches = 0
    for n, spec in enumerate(trace.specs):
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
            tokens += ((fam.region_tokens + fam.region_separator) * len(seg.grids) - fam.region_separator
                       if seg.regions else sum(fam.tokens_of_grid(g) for g in seg.grids))
        if tokens > lim.request_tokens:
            raise VlmpathError(f"{where}: request {n} has {tokens} prefill tokens, over the {scale} "
                               f"limit of {lim.request_tokens}; {fix}")
        total_tokens += tokens
    if total_tokens > lim.trace_tokens or total_patches > lim.trace_patches:
        raise VlmpathError(f"{where}: {total_tokens} prefill tokens and {total_patches} vision patches "
                           f"in all, over the {scale} limits of {lim.trace_tokens} tokens and "
                           f"{lim.trace_patches} patches; {fix}")


def _named_encoder(line: str, where: str) -> str | None:
    """The encoder an ``{"encoder": NAME}`` line names (None: ``line`` is a request)."""
    obj = _json_line(line, where, 'the first line may be {"encoder": NAME}, then one request per line')
    if not (isinstance(obj, dict) and "encoder" in obj):
        return None
    if set(obj) != {"encoder"} or not isinstance(obj["encoder"], str):
        raise VlmpathError(f'{where}: the encoder line is {{"encoder": NAME}} alone, got {line.strip()[:80]}')
    try:
        family_of(obj["encoder"])
    except UnknownNameError as exc:
        raise VlmpathError(f"{where}: {exc}") from None
    return obj["encoder"]


def _trace_encoder(named: str | None, specs: list[RequestSpec], name: str) -> str:
    """The named encoder, checked against the trace's items; unnamed: the default encoder,
    or its family's regions encoder when a regions item needs it."""
    fam = family_of(named or DEFAULT_ENCODER)
    regions = any(isinstance(m, MediaSpec) and m.regions for s in specs for m in s.segments)
    if named is None:
        return fam.regions_encoder if regions else DEFAULT_ENCODER
    if regions and named != fam.regions_encoder:
        raise VlmpathError(f"trace file {name!r} has regions items, which encoder {named!r} does not read; "
                           f"name {fam.regions_encoder!r} in its encoder line" if fam.regions_encoder else
                           f"trace file {name!r} has regions items, which model family {fam.name!r} has not")
    return named


def parse_trace_bytes(data: bytes, name: str, scale: Scale = DEFAULT_SCALE) -> Trace:
    """A trace's bytes to its encoder and request specs in arrival order, with the
    encoder's family arithmetic at ``scale``; ``VlmpathError`` otherwise."""
    if len(data) > MAX_TRACE_BYTES:
        raise VlmpathError(f"trace file {name!r} is {len(data)} bytes, over the limit of "
                           f"{MAX_TRACE_BYTES}; split it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise VlmpathError(f"{name}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                           f"{exc.start}); save the trace as UTF-8 JSON Lines") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    named = _named_encoder(lines[0][1], f"{name}:{lines[0][0]}") if lines else None
    fam = family_of(named or DEFAULT_ENCODER)
    rows: list[tuple[float, int, RequestSpec]] = []
    for n, line in lines[1:] if named else lines:
        if len(rows) >= MAX_TRACE_REQUESTS:
            raise VlmpathError(f"trace file {name!r} holds more than {MAX_TRACE_REQUESTS} "
                               "requests; split it")
        arrival, spec = parse_trace_line(line, f"{name}:{n}", fam, scale)
        rows.append((arrival, n, spec))
    if not rows:
        raise VlmpathError(f"trace file {name!r} holds no requests")
    rows.sort(key=lambda r: (r[0], r[1]))
    specs = [s for _, _, s in rows]
    return Trace(_trace_encoder(named, specs, name), tuple(specs))


def read_trace(path: str | Path, scale: Scale | None = None) -> Trace:
    """A JSONL trace's encoder and request specs in arrival order (cheap: builds no
    features); with a ``scale``, also checked against that scale's size limits."""
    path = check_input_file(path, "trace file", 'pass trace:FILE.jsonl, one {"segments": [...]} per line')
    # A regular file, checked on the open descriptor, read with the size cap: a device
    # file or a huge sparse file is refused before its bytes are read.
    data = safe_json.read_capped(path, "trace file", MAX_TRACE_BYTES)
    trace = parse_trace_bytes(data, str(path), scale or DEFAULT_SCALE)
    if scale is not None:
        check_trace_size(trace, scale, str(path))
    return trace


def load_trace(path: str | Path, scale: Scale = DEFAULT_SCALE, seed: int = 0,
               chunk_size: int | None = None) -> Workload:
    """Replay a JSONL trace (see the module docstring) as a workload on its encoder. The
    multi-region encoder routes a trace's plain images and videos straight through the
    tower (rows per grid), as an engine serving both does."""
    path = Path(path)
    trace = read_trace(path, scale)
    shapes = SHAPES[scale]
    requests = build_requests(trace.specs, shapes.vocab, seed, trace.family)
    return build_workload(f"trace:{path.stem}", scale, trace.encoder, requests,
                          shapes.chunk if chunk_size is None else chunk_size, shapes.vocab, seed)
