"""What is a serve run on disk, and what of a file that claims to be one is believed?

One JSON document per run (``vlmpath serve-bench --out FILE``), written atomically. Such a
file may come from another machine or a pull request's job, so ``load_run`` believes only
its shape: a known schema, workload names of at most 64 safe characters, concurrency
levels and counts in range, finite non-negative numbers, texts and lists capped. Anything
else is one ``VlmpathError`` naming the file and the field. What a number means is never
read from the file (the metric table decides, in ``compare.from_serve``).
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from vlmpath.core.atomic import write_text
from vlmpath.core.errors import VlmpathError
from vlmpath.core.safe_json import load_file

SCHEMA = "vlmpath-serve-run/1"
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
MAX_CASES = 512
MAX_PROMPTS = 4096
MAX_TEXT = 1 << 16
MAX_ERROR = 400
NUMBERS = ("request_per_s", "input_tok_per_s", "output_tok_per_s", "ttft_p50_s", "ttft_p99_s",
           "itl_p50_s", "itl_p99_s", "agreement_solo")
COUNTS = ("prompts", "repeats", "completed", "errors", "early_stops")


def write_run(path: str | os.PathLike[str], doc: dict) -> None:
    write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _bad(where: str, what: str) -> VlmpathError:
    return VlmpathError(f"{where}: {what}; pass a file written by `vlmpath serve-bench --out`")


def _number(v: Any, where: str, field: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise _bad(where, f"{field} is not a finite non-negative number")
    return float(v)


def _count(v: Any, where: str, field: str, hi: int = 1 << 40) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= hi:
        raise _bad(where, f"{field} is not a whole number 0-{hi}")
    return v


def _texts(v: Any, where: str, field: str) -> list[str | None]:
    if not isinstance(v, list) or len(v) > MAX_PROMPTS:
        raise _bad(where, f"{field} is not a list of at most {MAX_PROMPTS} texts")
    if any(t is not None and (not isinstance(t, str) or len(t) > MAX_TEXT) for t in v):
        raise _bad(where, f"{field} holds something that is not a text of at most {MAX_TEXT} characters")
    return list(v)


def _name(v: Any, where: str, field: str) -> str:
    if not isinstance(v, str) or not _NAME.match(v):
        raise _bad(where, f"{field} is not a name of 1-64 letters, digits or _.:-")
    return v


def _case(c: Any, where: str) -> dict:
    if not isinstance(c, dict):
        raise _bad(where, "a case is not an object")
    w = f"{where}: case {c.get('workload')!r}"[:200]
    out: dict[str, Any] = {"workload": _name(c.get("workload"), where, "workload"),
                           "concurrency": _count(c.get("concurrency"), w, "concurrency", 4096)}
    if out["concurrency"] < 1:
        raise _bad(w, "concurrency is below 1")
    for k in COUNTS:
        out[k] = _count(c.get(k, 0), w, k)
    for k in NUMBERS:
        out[k] = _number(c.get(k), w, k)
    if out["agreement_solo"] is not None and out["agreement_solo"] > 1:
        raise _bad(w, "agreement_solo is above 1")
    fd = c.get("first_diff_solo")
    out["first_diff_solo"] = None if fd is None else _count(fd, w, "first_diff_solo")
    err = c.get("error")
    if err is not None and not isinstance(err, str):
        raise _bad(w, "error is not a text")
    out["error"] = None if err is None else err[:MAX_ERROR]
    samples = c.get("samples", {})
    if not isinstance(samples, dict):
        raise _bad(w, "samples is not an object")
    out["samples"] = {}
    for k, vals in samples.items():
        if k not in NUMBERS or not isinstance(vals, list) or len(vals) > MAX_PROMPTS:
            raise _bad(w, f"samples.{str(k)[:40]} is not a known metric with a list of samples")
        out["samples"][k] = [_number(x, w, f"samples.{k}") for x in vals if x is not None]
    out["rids"] = [_count(r, w, "rids", MAX_PROMPTS) for r in c.get("rids", [])][:MAX_PROMPTS]
    out["outputs"] = _texts(c.get("outputs", []), w, "outputs")
    return out


def _labelled(v: Any, where: str) -> dict:
    """The labelled-set part (``serving.labelled``): its name, answers and outputs, paired."""
    w = f"{where}: labelled"
    if not isinstance(v, dict):
        raise _bad(w, "not an object")
    answers, outputs = _texts(v.get("answers"), w, "answers"), _texts(v.get("outputs"), w, "outputs")
    if not answers or len(answers) != len(outputs) or any(a is None for a in answers):
        raise _bad(w, "answers and outputs are not two equally long, non-empty lists")
    err = v.get("error")
    if err is not None and not isinstance(err, str):
        raise _bad(w, "error is not a text")
    return {"set": _name(v.get("set"), w, "set"), "answers": answers, "outputs": outputs,
            "errors": _count(v.get("errors", 0), w, "errors", len(answers)),
            "error": None if err is None else err[:MAX_ERROR]}


def parse_run(doc: Any, where: str) -> dict:
    """The checked serve-run document (module doc)."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise _bad(where, f"not a serve run (schema is not {SCHEMA!r})")
    cases = doc.get("cases")
    if not isinstance(cases, list) or len(cases) > MAX_CASES:
        raise _bad(where, f"cases is not a list of at most {MAX_CASES}")
    solo_raw = doc.get("solo", {})
    if not isinstance(solo_raw, dict) or len(solo_raw) > MAX_CASES:
        raise _bad(where, "solo is not an object of workloads")
    solo = {_name(k, where, "solo workload"): _texts(v, where, f"solo.{k}") for k, v in solo_raw.items()}
    out = [_case(c, where) for c in cases]
    keys = [(c["workload"], c["concurrency"]) for c in out]
    if len(set(keys)) != len(keys):
        raise _bad(where, "a workload and concurrency level appears twice")
    server = doc.get("server") if isinstance(doc.get("server"), dict) else {}
    kind = server.get("kind")
    parsed = {"schema": SCHEMA, "cases": out, "solo": solo,
              "server": {"kind": kind if isinstance(kind, str) and _NAME.match(kind) else "unknown"}}
    if doc.get("labelled") is not None:
        parsed["labelled"] = _labelled(doc["labelled"], where)
    return parsed


def load_run(path: str | os.PathLike[str]) -> dict:
    where = f"serve run {os.fspath(path)!r}"
    return parse_run(load_file(path, "serve run", "pass a file written by `vlmpath serve-bench --out`"), where)
