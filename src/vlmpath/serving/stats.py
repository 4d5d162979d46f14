"""How are one level's request outcomes summarised: throughput, latency percentiles, agreement?

Throughput is over the level's wall time (first request sent to last reply read): requests,
prompt tokens (the server's count, vision placeholders included) and completion tokens per
second, as the engines' bench clients report them. TTFT and inter-token latency are
percentiles (linear interpolation) over the completed requests' values, ITL pooled over
every gap between content chunks. Agreement is the share of prompts whose greedy text is
identical to a reference text, and the first character position where any differs.
"""

from __future__ import annotations

from collections.abc import Sequence

from vlmpath.serving.client import Outcome


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100, linear interpolation); None for no values."""
    xs = sorted(values)
    if not xs:
        return None
    k = (len(xs) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def first_difference(a: str, b: str) -> int | None:
    """The first character index where ``a`` and ``b`` differ; None when identical."""
    if a == b:
        return None
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def agreement(texts: Sequence[str | None], reference: Sequence[str | None]) -> tuple[float, int | None]:
    """(share identical, first differing position over all) of ``texts[i]`` vs ``reference[i]``;
    a missing text (the request failed) on either side never agrees."""
    if not texts or len(texts) != len(reference):
        raise ValueError("agreement needs two equally long, non-empty lists")
    same, first = 0, None
    for t, r in zip(texts, reference):
        if t is not None and r is not None and t == r:
            same += 1
            continue
        d = 0 if t is None or r is None else first_difference(t, r)
        first = d if first is None else min(first, d)
    return same / len(texts), first


def summarise(outcomes: Sequence[Outcome], wall_s: float, max_tokens: int) -> dict:
    """Throughput, latency and error counts of one run of a level (see the module doc)."""
    done = [o for o in outcomes if o.ok]
    errors = [o for o in outcomes if not o.ok]
    wall = max(wall_s, 1e-9)
    ttft = [o.ttft_s for o in done if o.ttft_s is not None]
    itl = [g for o in done for g in o.itl_s]
    return {
        "completed": len(done),
        "errors": len(errors),
        "error": errors[0].error if errors else None,
        "wall_s": wall_s,
        "request_per_s": len(done) / wall,
        "input_tok_per_s": sum(o.prompt_tokens for o in done) / wall,
        "output_tok_per_s": sum(o.completion_tokens for o in done) / wall,
        "ttft_p50_s": percentile(ttft, 50), "ttft_p99_s": percentile(ttft, 99),
        "itl_p50_s": percentile(itl, 50), "itl_p99_s": percentile(itl, 99),
        # Fewer tokens than asked: the server stopped early (EOS honoured), so its tok/s
        # is not comparable with a server that generated them all.
        "early_stops": sum(1 for o in done if o.completion_tokens < max_tokens),
    }
