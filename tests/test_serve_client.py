"""Does the client read a streamed reply right, and is every way a server misbehaves one bounded failure?

Fast: a stdlib HTTP server in a thread plays the OpenAI server (a good stream, an error
event, HTTP 500, a stream cut before its usage record, a server that never answers). The
launcher's checks before anything starts (a port in use, a directory that is no model, an
unknown plant, a bad URL) are one line naming the input. The bench's fixed-concurrency
sender keeps every prompt an outcome, in order, when the server has gone.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vlmpath.core.errors import VlmpathError
from vlmpath.serving import launch
from vlmpath.serving.bench import _send
from vlmpath.serving.client import split_url, stream_chat

GOOD = [{"choices": [{"delta": {"role": "assistant"}}]}, {"choices": [{"delta": {"content": "ab"}}]},
        {"choices": [{"delta": {"content": "c"}}]},
        {"choices": [{"delta": {}, "finish_reason": "length"}], "usage": {"prompt_tokens": 75, "completion_tokens": 2}}]


def _handler(mode: str, hold: threading.Event):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            if mode == "500":
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b"boom")
                return
            if mode == "hang":
                hold.wait(10)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            events = {"good": GOOD, "error": GOOD[:2] + [{"error": "kv cache full"}], "cut": GOOD[:3]}[mode]
            for ev in events:
                self.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")

    return H


@pytest.fixture
def fake():
    servers = []
    hold = threading.Event()

    def start(mode: str) -> str:
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _handler(mode, hold))
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    hold.set()
    for s in servers:
        s.shutdown()
        s.server_close()


def test_a_good_stream_gives_text_usage_and_chunk_times(fake):
    out = stream_chat(fake("good"), {"messages": []}, timeout_s=10)
    assert out.ok and out.text == "abc" and out.prompt_tokens == 75 and out.completion_tokens == 2
    assert out.ttft_s is not None and len(out.itl_s) == 1


@pytest.mark.parametrize("mode, says", [("error", "server error: kv cache full"), ("500", "HTTP 500"),
                                        ("cut", "without a usage record")])
def test_a_misbehaving_server_is_one_failed_outcome(fake, mode, says):
    out = stream_chat(fake(mode), {"messages": []}, timeout_s=10)
    assert not out.ok and says in out.error


def test_a_server_that_never_answers_is_a_failure_after_the_timeout(fake):
    out = stream_chat(fake("hang"), {"messages": []}, timeout_s=0.5)
    assert not out.ok and "0.5 s" in out.error


def test_nobody_listening_is_a_failed_outcome():
    port = launch.free_port()
    out = stream_chat(f"http://127.0.0.1:{port}", {"messages": []}, timeout_s=2)
    assert not out.ok and "connection failed" in out.error


def test_a_dead_server_fails_every_remaining_prompt_in_order():
    dead = launch.Server(url=f"http://127.0.0.1:{launch.free_port()}", kind="transformers", model=None)
    outs, _ = _send(dead, [{"messages": []}] * 5, concurrency=2, timeout_s=2)
    assert len(outs) == 5 and all(not o.ok for o in outs)


def test_a_port_in_use_is_one_line_naming_it():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(VlmpathError, match=f"--port {port}: 127.0.0.1:{port} is in use"):
            launch.check_port(port)


def test_checks_before_a_launch_name_their_input(tmp_path):
    with pytest.raises(VlmpathError, match="no config.json"):
        with launch.launched("transformers", str(tmp_path), log_dir=tmp_path):
            pass
    with pytest.raises(VlmpathError, match="--launch 'tgi'"):
        with launch.launched("tgi", str(tmp_path), log_dir=tmp_path):
            pass
    for bad in ("rows", "delay:0", "delay:x", "exit:-1"):
        with pytest.raises(VlmpathError, match="--plant"):
            launch.check_plant(bad)
    assert launch.check_plant("delay:0.5") == "delay:0.5" and launch.check_plant("exit:3") == "exit:3"
    for url in ("ftp://x", "localhost:8000", "http://h:99999"):
        with pytest.raises(VlmpathError, match="--server"):
            split_url(url)


def test_each_kind_asks_for_exactly_max_tokens_and_has_a_command_line():
    tf = launch.extra_body("transformers", 8)
    assert json.loads(tf["generation_config"]) == {"max_new_tokens": 8, "min_new_tokens": 8, "do_sample": False}
    assert launch.extra_body("sglang", 8)["ignore_eos"] and launch.extra_body("vllm", 8)["ignore_eos"]
    for kind, module in (("transformers", "transformers.cli.transformers"), ("sglang", "sglang.launch_server"),
                         ("vllm", "vllm.entrypoints.openai.api_server")):
        cmd = launch.command(kind, "py", "/m", 1234, "cpu")
        assert cmd[:3] == ["py", "-m", module] and "1234" in cmd and "/m" in cmd


def test_a_dead_servers_reason_is_the_root_cause_not_its_shutdown_noise(tmp_path):
    """As vLLM's CPU server died under the split plant: a warning that names an OSError at
    start-up, the worker's traceback and its RuntimeError, the engine's "see above", then
    shutdown warnings. The reason is the RuntimeError line; a log with no traceback gives
    its last line."""
    log = tmp_path / "server.log"
    log.write_text("\n".join([
        "WARNING [system_utils.py:255] failed to raise the ulimit: OSError: [Errno 24] Too many open files",
        "(Worker pid=1) ERROR Traceback (most recent call last):",
        '(Worker pid=1) ERROR   File "gpu_model_runner.py", line 9, in _execute_mm_encoder',
        "(Worker pid=1) ERROR RuntimeError: shape mismatch: value tensor of shape [96, 64] cannot be broadcast",
        "(APIServer pid=2) ERROR vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
        "  warnings.warn('resource_tracker: There appear to be %d '", ""]))
    srv = launch.Server("http://127.0.0.1:1", "vllm", None, log=log)
    assert srv.why_it_died().endswith("RuntimeError: shape mismatch: value tensor of shape [96, 64] cannot be broadcast")
    log.write_text("starting\nbye\n")
    assert srv.why_it_died() == "bye"
