"""Do the trace parser and the results/artifact loaders give a result or the project's own
error (``VlmpathError``) on any input, never another exception?

Property-based (Hypothesis): arbitrary bytes, arbitrary JSON, and JSON shaped like the real
files with fields swapped for arbitrary values. Bounded (``max_examples``, no deadline) so
the set runs in seconds; each property also runs its one known-good input, which must load.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from asv_fixtures import sha, write_asv_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vlmpath.core.errors import VlmpathError

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
SEGMENT_KEYS = st.sampled_from(["text", "image", "image_grid", "video_grid", "regions", "audio"])
segments = st.lists(st.dictionaries(SEGMENT_KEYS, json_values, min_size=1, max_size=2), max_size=4)
trace_objects = st.fixed_dictionaries({"segments": segments}, optional={"arrival": json_values})
#: The optional first line naming the encoder (any value: an unknown name is an error).
encoder_lines = st.fixed_dictionaries({"encoder": st.sampled_from(["qwen2_5_vl", "multi_region", "evs", "internvl", "nope"]) | json_values})


def _ok_or_own_error(fn, *args):
    try:
        return fn(*args)
    except VlmpathError:
        return None


# --- the trace parser ----------------------------------------------------------------------
@FAST
@given(st.binary(max_size=300))
def test_trace_bytes(data):
    from vlmpath.measure.traces import parse_trace_bytes

    _ok_or_own_error(parse_trace_bytes, data, "t.jsonl")


@FAST
@given(st.lists(trace_objects | json_values | encoder_lines, min_size=1, max_size=3))
def test_trace_json(objs):
    from vlmpath.measure.traces import check_trace_size, parse_trace_bytes

    data = "\n".join(json.dumps(o) for o in objs).encode()
    trace = _ok_or_own_error(parse_trace_bytes, data, "t.jsonl")
    if trace is not None:
        _ok_or_own_error(check_trace_size, trace, "tiny", "t.jsonl")


def test_trace_known_good_parses():
    from vlmpath.measure.traces import parse_trace_bytes

    assert len(parse_trace_bytes(b'{"segments": [{"text": 3}, {"image": [28, 28]}]}\n', "t").specs) == 1


# --- the failures file --------------------------------------------------------------------
@FAST
@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_failures_file(data):
    from vlmpath.core.failures import read_failures

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "vlmpath-failures-00000000.json"
        p.write_bytes(data)
        _ok_or_own_error(read_failures, p)


# --- asv results, fingerprint, machine file -------------------------------------------------
SPEC = {"bench_x.A.track_tok_per_s": ("tok/s", ["preset"], [["a", "b"]], [1.0, 2.0], None)}
BASE = sha("fuzz-base")
_TEMPLATE = Path(tempfile.mkdtemp(prefix="vlmpath-fuzz-"))
write_asv_run(_TEMPLATE, "m1", BASE, SPEC, {"torch": "2.13.0"})
_RUN_FILE = next((_TEMPLATE / "m1").glob(f"{BASE[:8]}-*.json")).name


def _load_with(name: str, data: bytes):
    from vlmpath.compare.asv_results import load_asv

    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "res"
        shutil.copytree(_TEMPLATE, root)
        (root / "m1" / name).write_bytes(data)
        return _ok_or_own_error(load_asv, root, BASE)


def test_results_known_good_loads():
    # The template must load to what was written (not merely to something): else the
    # properties below would pass on a loader that refuses every input as its own error.
    run = _load_with("extra.txt", b"")
    assert run is not None and run.commit == BASE
    [machine] = run.machines
    assert machine.machine == "m1"
    got = sorted((m.benchmark, dict(m.params)["preset"], m.unit, m.value) for m in machine.metrics)
    assert got == [("bench_x.A.track_tok_per_s", "a", "tok/s", 1.0), ("bench_x.A.track_tok_per_s", "b", "tok/s", 2.0)]


@FAST
@given(st.binary(max_size=200))
def test_results_file_bytes(data):
    _load_with(_RUN_FILE, data)


@FAST
@given(st.sampled_from(["result", "params", "started_at", "date", "results", "commit_hash", "version"]),
       json_values)
def test_results_file_wrong_typed_fields(field, value):
    d = json.loads((_TEMPLATE / "m1" / _RUN_FILE).read_text(encoding="utf-8"))
    if field in ("result", "params"):
        row = d["results"]["bench_x.A.track_tok_per_s"]
        row[0 if field == "result" else 1] = value
    else:
        d[field] = value
    _load_with(_RUN_FILE, json.dumps(d).encode())


@FAST
@given(st.sampled_from(["machine.json", f"vlmpath-fingerprint-{BASE[:8]}.json", "benchmarks.json"]),
       st.binary(max_size=100) | json_values.map(lambda v: json.dumps(v).encode()))
def test_side_files(name, data):
    if name == "benchmarks.json":
        from vlmpath.compare.asv_results import load_asv

        with tempfile.TemporaryDirectory() as d:
            root = Path(d) / "res"
            shutil.copytree(_TEMPLATE, root)
            (root / name).write_bytes(data)
            _ok_or_own_error(load_asv, root, BASE)
    else:
        _load_with(name, data)


# --- pytest-benchmark JSON and the ci artifact's run record --------------------------------
@FAST
@given(json_values | st.fixed_dictionaries({"benchmarks": st.lists(
    st.dictionaries(st.sampled_from(["name", "stats", "params", "group", "fullname"]), json_values),
    max_size=3)}))
def test_pytest_benchmark_json(value):
    from vlmpath.compare.pytest_results import load_pytest_benchmark

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "pb.json"
        p.write_text(json.dumps(value), encoding="utf-8")
        _ok_or_own_error(load_pytest_benchmark, p)


@FAST
@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_ci_run_record(data):
    from vlmpath.pr.artifact import read_manifest

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "run.json"
        p.write_bytes(data)
        _ok_or_own_error(read_manifest, p)


# --- the YAML loader, the what-grew and profiles readers, the escaping sinks ------------------
yaml_texts = st.lists(st.sampled_from(list("ab:-[]{},|'\"#\n .09\t") + ["&a ", "*a", "<<: ", "!!str ", "!x "]),
                      max_size=40).map("".join)


@FAST
@given(yaml_texts | st.text(max_size=60))
def test_yaml_loader(text):
    from vlmpath.core import safe_yaml

    _ok_or_own_error(safe_yaml.loads, text, "f.yaml")


def test_yaml_loader_known_good():
    from vlmpath.core import safe_yaml

    assert safe_yaml.loads("accepted:\n  - {case: a, pr: 7, reason: 'r'}\nfactor: [0.1, 0.25]\n", "f") == {
        "accepted": [{"case": "a", "pr": 7, "reason": "r"}], "factor": [0.1, 0.25]}


@FAST
@given(json_values | st.lists(st.dictionaries(st.sampled_from(
    ["case", "base_total", "head_total", "functions", "python", "aten", "notes", "unit"]), json_values), max_size=3))
def test_what_grew_and_profiles_readers(value):
    from vlmpath.compare.ir_grew import growths_from_json
    from vlmpath.compare.profile_diff import profiles_from_json
    from vlmpath.render.ir_grew import render_grew

    text = json.dumps(value)
    try:
        render_grew(growths_from_json(text))  # read and rendered, or one ValueError
    except ValueError:
        pass
    _ok_or_own_error(profiles_from_json, text)


@FAST
@given(st.text(max_size=80))  # any code points: controls, bidi, zero-width, surrogates
def test_every_sink_lets_through_only_its_allowlist(text):
    import re

    from vlmpath.render.escape import file_name, html_escape, log_line, md_code, md_escape, title_text

    for out in (md_escape(text), html_escape(text), md_code(text), log_line(text), title_text(text)):
        assert out.isprintable()
        out.encode("utf-8")  # no surrogate is left to break a write
    assert not re.search(r"[<>@\n]", md_escape(text) + html_escape(text))
    assert "##[" not in log_line(text) and not log_line(text).lstrip().startswith("::")
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}", file_name(text))
