"""What did the engine do in the measured steps, and does the name-based guess of its seams agree?

The labels a record carries (``engine_seams``) describe the engine; a label guessed from
the names a release defines (``sglang_api``, ``vllm_api``) is wrong the day a release
implements the same thing under another name. So the labels below are derived from what
the engine did while it was measured, and the name-based guess is kept only as a
cross-check:

- ``chunk_encoding`` (both engines): ``StepCalls`` holds, per forward step, the requests of
  the items each encoder call held. One call holding items of two requests is
  ``batched_cross_request``; a step with cache misses in two requests served only by calls
  of one request each is ``per_request``; no step with misses in two requests: unobserved;
- ``count`` (sglang): host readbacks outside the tower in the counted pass: none is
  ``host_offsets``; one named ``item`` (``mask.sum().item()``) is ``mask_sum_item``;
- ``scatter`` (sglang) and ``merge`` (vLLM): of the operators that write rows into the
  prompt's embeddings (``SCATTER_OPS``), the one that wrote the most elements in the counted
  pass (the rows: items' tokens x hidden): ``masked_scatter_``, ``index_put`` (a ``where``
  index or a boolean-mask assignment) or ``index_copy`` (cumsum offsets); nothing without a
  counted pass;
- ``shm`` (sglang): digests computed on the receiving side at arrival: none means the hash
  was forwarded with the shared-memory wrapper (``precomputed_hash``); any means the receiver
  hashed (``rehash_after_materialize``, or ``none``: no wrapper at all).

``labelled(seams, ...)`` returns the seams with each observed label in place of the guess;
where they disagree it keeps the guess as ``KEY_by_name`` and says so in ``disagreements``
(one line per label). ``labelled_by`` lists which labels came from behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Per label: the name-based guesses each behaviour agrees with.
AGREES = {
    "chunk_encoding": {"batched_cross_request": {"batched_cross_request"}, "per_request": {"per_request"}},
    "count": {"host_offsets": {"host_offsets"}, "mask_sum_item": {"mask_sum_item"}},
    "shm": {"precomputed_hash": {"precomputed_hash"},
            "rehash_after_materialize": {"rehash_after_materialize", "none"}},
    "scatter": {"masked_scatter_": {"masked_scatter_"}, "index_put": {"where_index"},
                "index_copy": {"cumsum_index_copy"}},
    "merge": {"masked_scatter_": {"masked_scatter_"}, "index_put": {"index_put"}},
}
#: The aten operators that write embedding rows in place, by the label each one gives.
SCATTER_OPS = {"aten::masked_scatter_": "masked_scatter_", "aten::masked_scatter": "masked_scatter_",
               "aten::index_put_": "index_put", "aten::index_put": "index_put",
               "aten::index_copy_": "index_copy", "aten::index_copy": "index_copy"}
#: Each engine's name for that seam.
SCATTER_KEY = {"sglang": "scatter", "vllm": "merge"}


@dataclass
class StepCalls:
    """Per forward step, the request ids of the items each encoder call held."""

    steps: list[list[frozenset]] = field(default_factory=list)

    def step(self) -> None:
        self.steps.append([])

    def call(self, rids) -> None:
        if not self.steps:
            self.step()
        self.steps[-1].append(frozenset(rids))

    def chunk_encoding(self) -> str | None:
        if any(len(call) >= 2 for step in self.steps for call in step):
            return "batched_cross_request"
        if any(len(frozenset().union(*step)) >= 2 for step in self.steps if step):
            return "per_request"
        return None


def scatter_of(aten: dict | None) -> str | None:
    """The label of the row-writing operator that wrote the most elements (see above)."""
    written = {op: n for op, n in (aten or {}).items() if op in SCATTER_OPS and isinstance(n, int) and n > 0}
    return SCATTER_OPS[max(written, key=written.__getitem__)] if written else None


def observed(calls: StepCalls | None, syncs: int | None, sync_events: dict, receiver_digests: int | None,
             engine: str, *, aten: dict | None = None) -> dict:
    """The labels the measured behaviour gives (only those it can tell); ``aten``: the counted
    pass's elements written per operator (a record's ``counts_top["aten"]``)."""
    out = {}
    scatter = scatter_of(aten)
    if scatter and engine in SCATTER_KEY:
        out[SCATTER_KEY[engine]] = scatter
    encoding = calls.chunk_encoding() if calls is not None else None
    if encoding:
        out["chunk_encoding"] = encoding
    if engine == "sglang":
        if syncs == 0:
            out["count"] = "host_offsets"
        elif syncs and any("item" in k for k in sync_events):
            out["count"] = "mask_sum_item"
        if receiver_digests is not None:
            out["shm"] = "precomputed_hash" if receiver_digests == 0 else "rehash_after_materialize"
    return out


def labelled(seams: dict, seen: dict) -> dict:
    """``seams`` with the observed labels in place (see the module docstring)."""
    out = dict(seams)
    lines = []
    for key, value in sorted(seen.items()):
        guess = seams.get(key)
        guess = None if guess == "unknown" else guess  # the names found nothing: not a claim
        if guess is not None and guess not in AGREES.get(key, {}).get(value, {value}):
            out[f"{key}_by_name"] = guess
            lines.append(f"{key}: the engine behaved as {value}, its names suggest {guess}")
            out[key] = value
        elif guess is None:
            out[key] = value
    if seen:
        out["labelled_by"] = "behaviour:" + ",".join(sorted(seen))
    if lines:
        out["disagreements"] = "; ".join(lines)
    return out
