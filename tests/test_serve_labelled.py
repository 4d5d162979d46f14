"""Does ``serve-bench --labelled`` score a labelled image set on the server, and does
``serve-compare`` judge the labelled-set score base vs head (exact, from the metric table)?

Fast: a stdlib HTTP server in a thread plays an OpenAI-compatible server that names the
colour of the image it was sent (the image really travels: decoded from the request); a
"shifted" server names the previous request's colour (a misplaced row). Bad sets (a line
that is no JSON object, an image outside the file's folder, one too large or not an image,
too many lines) are one line naming the file and the line, before any server is asked.
"""

from __future__ import annotations

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from vlmpath.cli import main
from vlmpath.compare.comparison import Verdict
from vlmpath.compare.from_serve import compare_serve_runs
from vlmpath.core.metrics import METRIC_BY_NAME
from vlmpath.serving import labelled
from vlmpath.serving.run_file import load_run

COLOURS = {(255, 0, 0): "red", (0, 160, 0): "green", (0, 0, 255): "blue"}
SCORE = "serve.Serve.track_serve_labelled_score"


def _colour(body: dict) -> str | None:
    for part in body["messages"][0]["content"]:
        if part.get("type") == "image_url":
            raw = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
            return COLOURS.get(Image.open(io.BytesIO(raw)).convert("RGB").getpixel((0, 0)), "grey")
    return None


def _handler(shift: bool, last: list):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen = _colour(body)
            said = (last[-1] if last else "grey") if shift else seen
            last.append(seen)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for ev in ({"choices": [{"delta": {"content": f"The {said}."}}]},
                       {"choices": [{"delta": {}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 20, "completion_tokens": 3}}):
                self.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    return H


@pytest.fixture
def fake():
    servers = []

    def start(shift: bool = False) -> str:
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _handler(shift, []))
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _set(tmp_path, lines=None):
    d = tmp_path / "set"
    (d / "img").mkdir(parents=True, exist_ok=True)
    for rgb, name in COLOURS.items():
        Image.new("RGB", (28, 28), rgb).save(d / "img" / f"{name}.png")
    if lines is None:
        lines = [json.dumps({"image": f"img/{n}.png", "question": "Which colour is it?", "answer": f"  {n.upper()} "})
                 for n in ("red", "green", "blue", "red")]
    f = d / "colours.jsonl"
    f.write_text("\n".join(lines) + "\n")
    return f


def _bench(url, labelled_file, out, capsys) -> tuple[int, str]:
    code = main(["serve-bench", "--server", url, "--workload", "video", "--concurrency", "1", "--engine-client",
                 "none", "--labelled", str(labelled_file), "--out", str(out)])
    return code, capsys.readouterr().err


def test_normalisation_is_case_space_and_edge_punctuation_only():
    assert labelled.normalise("  The   Cat. ") == labelled.normalise("the cat") == "the cat"
    assert labelled.normalise("cats") != labelled.normalise("cat")
    assert labelled.normalise("(Ａ)") == "a"  # NFKC: a full-width letter is the letter


def test_a_labelled_set_is_scored_on_the_server_and_a_shift_is_red_an_unchanged_pair_green(fake, tmp_path, capsys):
    f = _set(tmp_path)
    code, err = _bench(fake(), f, tmp_path / "base.json", capsys)
    assert code == 0 and "labelled-set score colours: 0/4" in err  # "The red." is not "red"
    # Answers the model gives: "The <colour>" (normalised).
    f.write_text("\n".join(json.dumps({"image": f"img/{n}.png", "question": "Which colour?", "answer": f"the {n}"})
                           for n in ("red", "green", "blue", "red")) + "\n")
    assert _bench(fake(), f, tmp_path / "base.json", capsys)[0] == 0
    assert _bench(fake(), f, tmp_path / "same.json", capsys)[0] == 0
    assert _bench(fake(shift=True), f, tmp_path / "shift.json", capsys)[0] == 0
    base = load_run(tmp_path / "base.json")["labelled"]
    assert labelled.score(base) == (4, 4) and base["set"] == "colours"

    same, _ = compare_serve_runs([str(tmp_path / "base.json")], [str(tmp_path / "same.json")])
    row = next(c for c in same.all() if c.benchmark == SCORE)
    assert row.verdict is Verdict.UNCHANGED and row.params == (("set", "colours"),) and same.exit_code() == 0
    red, _ = compare_serve_runs([str(tmp_path / "base.json")], [str(tmp_path / "shift.json")])
    row = next(c for c in red.all() if c.benchmark == SCORE)
    assert row.verdict is Verdict.REGRESSION and row.head == 0.0 and row.base == 1.0  # each answer one behind
    assert row.unit == METRIC_BY_NAME["serve_labelled_score"].unit and row.method == "exact"


def test_the_score_is_recomputed_from_outputs_never_taken_from_the_file(fake, tmp_path, capsys):
    f = _set(tmp_path, [json.dumps({"image": "img/red.png", "question": "q", "answer": "the red"})])
    _bench(fake(), f, tmp_path / "base.json", capsys)
    doc = json.loads((tmp_path / "base.json").read_text())
    doc["labelled"]["outputs"] = ["nonsense"]
    doc["labelled"]["score"] = 1.0  # a claimed score: never read
    (tmp_path / "head.json").write_text(json.dumps(doc))
    report, _ = compare_serve_runs([str(tmp_path / "base.json")], [str(tmp_path / "head.json")])
    row = next(c for c in report.all() if c.benchmark == SCORE)
    assert row.verdict is Verdict.REGRESSION and row.head == 0.0


@pytest.mark.parametrize("line, why", [
    ("[1, 2]", "not a JSON object"),
    ("{not json", "not a JSON object"),
    ('{"image": "img/red.png", "question": "q"}', "'answer' is not a text"),
    ('{"image": "../outside.png", "question": "q", "answer": "a"}', "outside the file's directory"),
    ('{"image": "img/nope.png", "question": "q", "answer": "a"}', "is not a file"),
    ('{"image": "img/broken.png", "question": "q", "answer": "a"}', "does not decode"),
    ('{"image": "img/big.png", "question": "q", "answer": "a"}', "over 1000 pixels"),
])
def test_a_bad_line_is_one_line_naming_the_file_and_the_line(tmp_path, capsys, monkeypatch, line, why):
    monkeypatch.setattr(labelled, "MAX_IMAGE_PIXELS", 1000)
    good = json.dumps({"image": "img/red.png", "question": "q", "answer": "a"})
    f = _set(tmp_path, [good, "", line])
    Image.new("RGB", (28, 28)).save(tmp_path / "outside.png")
    (f.parent / "img" / "broken.png").write_bytes(b"\x89PNG not really")
    Image.new("RGB", (40, 40)).save(f.parent / "img" / "big.png")
    code, err = _bench("http://127.0.0.1:9", f, tmp_path / "out.json", capsys)  # nothing listens: refused first
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and why in lines[0]
    assert str(f) in lines[0] and "line 3" in lines[0]
    assert not (tmp_path / "out.json").exists()


def test_a_set_too_large_or_too_long_is_refused(tmp_path, capsys, monkeypatch):
    good = json.dumps({"image": "img/red.png", "question": "q", "answer": "a"})
    f = _set(tmp_path, [good] * 3)
    monkeypatch.setattr(labelled, "MAX_ITEMS", 2)
    code, err = _bench("http://127.0.0.1:9", f, tmp_path / "o.json", capsys)
    assert code == 2 and "line 3" in err and "more than 2 items" in err
    monkeypatch.setattr(labelled, "MAX_FILE_BYTES", 10)
    code, err = _bench("http://127.0.0.1:9", f, tmp_path / "o.json", capsys)
    assert code == 2 and str(f) in err
