"""How does one serve run read in a terminal or a markdown report?

One row per workload and concurrency level: requests, errors, request/s, input and output
tok/s, TTFT and ITL (p50/p99), agreement with the same request alone and its first
differing character. Every cell from the file goes through ``log_line`` (the file may come
from another machine's job); numbers through the one formatter.
"""

from __future__ import annotations

from vlmpath.render.escape import log_line
from vlmpath.render.fmt import fmt_value

HEADER = ("workload", "conc", "requests", "errors", "req/s", "input tok/s", "output tok/s",
          "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "agreement", "first diff")


def _row(c: dict) -> tuple[str, ...]:
    fd = c.get("first_diff_solo")
    return tuple(log_line(x) for x in (
        c["workload"], c["concurrency"], c["prompts"] * max(c.get("repeats", 1), 1), c["errors"],
        fmt_value(c["request_per_s"], "req/s"), fmt_value(c["input_tok_per_s"], "tok/s"),
        fmt_value(c["output_tok_per_s"], "tok/s"), fmt_value(c["ttft_p50_s"], "seconds"),
        fmt_value(c["ttft_p99_s"], "seconds"), fmt_value(c["itl_p50_s"], "seconds"),
        fmt_value(c["itl_p99_s"], "seconds"), fmt_value(c["agreement_solo"], "fraction"),
        "-" if fd is None else fd))


def serve_table(doc: dict, markdown: bool = False) -> str:
    """The run's table (module doc); ``markdown``: a pipe table."""
    rows = [_row(c) for c in doc["cases"]]
    if markdown:
        lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    widths = [max([len(HEADER[i])] + [len(r[i]) for r in rows]) for i in range(len(HEADER))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    errs = [c for c in doc["cases"] if c.get("error")]
    lines += [log_line(f"FAILED {c['workload']} c={c['concurrency']}: {c['error']}") for c in errs]
    return "\n".join(lines) + "\n"


CLIENT_HEADER = ("workload", "conc", "client", "req/s ours", "req/s theirs", "output tok/s ours",
                 "output tok/s theirs", "same texts", "flag")


def engine_client_table(rows: list[dict]) -> str:
    """The engine's own client beside ours (``serving.engine_client``): one row per case, a
    ``not run: ...`` line for a client that could not run; empty for no rows."""
    if not rows:
        return ""
    lines = ["", "engine client on the same server and requests (flag: beyond our spread)"]
    table = [r for r in rows if not r.get("not_run")]
    cells = [tuple(log_line(x) for x in (
        r["workload"], r["concurrency"], r["client"], fmt_value(r["ours_request_per_s"], "req/s"),
        fmt_value(r.get("request_per_s"), "req/s"), fmt_value(r["ours_output_tok_per_s"], "tok/s"),
        fmt_value(r.get("output_tok_per_s"), "tok/s"), fmt_value(r.get("agreement_ours"), "fraction"),
        r.get("flag") or "-")) for r in table]
    if cells:
        widths = [max([len(CLIENT_HEADER[i])] + [len(c[i]) for c in cells]) for i in range(len(CLIENT_HEADER))]
        lines += ["  ".join(h.ljust(w) for h, w in zip(CLIENT_HEADER, widths)).rstrip(),
                  "  ".join("-" * w for w in widths)]
        lines += ["  ".join(v.ljust(w) for v, w in zip(c, widths)).rstrip() for c in cells]
    lines += [log_line(f"{r['client']}: {r['not_run']}") for r in rows if r.get("not_run")]
    return "\n".join(lines) + "\n"
