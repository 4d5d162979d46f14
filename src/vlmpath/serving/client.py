"""What did one streamed chat request to an OpenAI-compatible server give, and when?

``stream_chat`` POSTs one ``/v1/chat/completions`` request with ``stream: true`` (stdlib
``http.client``: no client dependency) and reads its server-sent events: the text, the
server's token usage (prompt tokens include the vision placeholders, as the engines' own
bench clients count them), the time to the first content chunk (TTFT) and the gaps between
content chunks (inter-token latency, as ``sglang.bench_serving`` and ``vllm bench serve``
take it). Every read is bounded: ``timeout_s`` per socket read and for the whole request,
lines and replies capped; a refused connection, a reset, a timeout, an HTTP error or an
``error`` event is an ``Outcome`` with ``error`` set, never an exception or a hang.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from vlmpath.core.errors import VlmpathError

#: Longest SSE line and whole reply text read (a hostile or broken server is cut here).
MAX_LINE = 1 << 20
MAX_TEXT = 1 << 16


@dataclass(frozen=True)
class Outcome:
    """One request's result; times in seconds from sending it."""

    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft_s: float | None = None
    latency_s: float = 0.0
    itl_s: tuple[float, ...] = field(default=())
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def split_url(url: str) -> tuple[str, int]:
    """``http://host:port`` -> (host, port); anything else is one line naming ``--server``."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise VlmpathError(f"--server {url!r}: give an http://HOST:PORT URL of an OpenAI-compatible server")
    try:
        return parts.hostname, parts.port or 80
    except ValueError:
        raise VlmpathError(f"--server {url!r}: the port is not a number 1-65535") from None


def get_json(url: str, path: str, timeout_s: float) -> tuple[int, object]:
    """GET ``path``: (status, parsed JSON or None); (0, reason) when nothing answered."""
    host, port = split_url(url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        raw = resp.read(MAX_LINE)
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, None
    except (OSError, http.client.HTTPException) as exc:
        return 0, f"{exc.__class__.__name__}: {exc}"
    finally:
        conn.close()


def _event(line: bytes) -> dict | str | None:
    line = line.strip()
    if not line.startswith(b"data:"):
        return None
    data = line[5:].strip()
    if data == b"[DONE]":
        return "done"
    try:
        ev = json.loads(data)
    except ValueError:
        return {"error": "the server sent an event that is not JSON"}
    return ev if isinstance(ev, dict) else {"error": "the server sent an event that is not an object"}


def _error_text(ev: dict) -> str:
    err = ev.get("error")
    msg = err.get("message", err) if isinstance(err, dict) else err
    return f"server error: {str(msg)[:300]}"


def stream_chat(url: str, body: dict, timeout_s: float) -> Outcome:
    """Send ``body`` (``stream`` forced on) and read the reply to its end (see the module doc)."""
    host, port = split_url(url)
    payload = json.dumps({**body, "stream": True}).encode()
    t0 = time.perf_counter()
    deadline = t0 + timeout_s
    chunks: list[float] = []
    text: list[str] = []
    usage: dict = {}
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)

    def fail(why: str) -> Outcome:
        return Outcome("".join(text), latency_s=time.perf_counter() - t0, error=why,
                       ttft_s=chunks[0] if chunks else None)

    try:
        conn.request("POST", "/v1/chat/completions", payload, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return fail(f"HTTP {resp.status}: {resp.read(300).decode('utf-8', 'replace')}")
        while True:
            if time.perf_counter() > deadline:
                return fail(f"no end of reply within {timeout_s:g} s")
            line = resp.readline(MAX_LINE)
            if not line:
                break
            ev = _event(line)
            if ev is None:
                continue
            if ev == "done":
                break
            if "error" in ev:
                return fail(_error_text(ev))
            if isinstance(ev.get("usage"), dict):
                usage = ev["usage"]
            for ch in ev.get("choices") or ():
                piece = (ch.get("delta") or {}).get("content") if isinstance(ch, dict) else None
                if piece:
                    chunks.append(time.perf_counter() - t0)
                    if sum(map(len, text)) < MAX_TEXT:
                        text.append(str(piece))
    except socket.timeout:
        return fail(f"no answer within {timeout_s:g} s (socket read timed out)")
    except (OSError, http.client.HTTPException) as exc:
        return fail(f"connection failed: {exc.__class__.__name__}: {exc}")
    finally:
        conn.close()
    if not usage:
        return fail("the reply ended without a usage record (did the server close the stream early?)")
    gaps = tuple(b - a for a, b in zip(chunks, chunks[1:]))
    return Outcome("".join(text)[:MAX_TEXT], _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")),
                   chunks[0] if chunks else None, time.perf_counter() - t0, gaps)


def _count(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 40 else 0
