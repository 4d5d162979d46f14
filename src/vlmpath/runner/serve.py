"""How is the published dashboard served over HTTP (``vlmpath serve``)?"""

from __future__ import annotations

import os
from pathlib import Path

from vlmpath.core.errors import VlmpathError


def make_server(html_dir: str | os.PathLike[str], port: int = 8080, bind: str = "127.0.0.1"):
    """An HTTP server over the published dashboard (call ``serve_forever``)."""
    from vlmpath.render.static_http import published_server

    root = Path(html_dir)
    if not (root / "index.html").is_file():
        raise VlmpathError(f"{root} has no index.html: run `vlmpath run` (it publishes the dashboard) "
                           "or pass --html-dir")
    try:  # files under the root only: no listings, no symlink escapes, no tracebacks
        return published_server(root, bind, port)
    except OSError as exc:
        raise VlmpathError(f"cannot listen on {bind}:{port} ({exc.strerror or exc}): pick another --port") from None

