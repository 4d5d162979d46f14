"""Which releases of an engine does ``vlmpath engine sweep NAME A..B`` measure, and when was each out?

``parse_selection("0.5.11..0.5.23")`` is a closed range of versions, ``"0.5.12,0.5.14"``
an explicit list, ``"0.5.23"`` one release. ``select`` applies it to the package index's
releases (``{version: upload date}``): a range keeps the *final* releases inside it
(no ``rc``/``dev``/``post``: one point per release an engine maintainer announces), a
list keeps exactly what it names (a named post-release or rc is fine) and refuses a
version the index does not have. The result is ordered by upload date, the time axis of
the sweep's timeline.

``index_releases(package)`` reads PyPI's JSON API (``/pypi/NAME/json``: every release's
files with their ``upload_time``); a release's date is its earliest file's upload.
The JSON is hostile input: bounded in size, depth and number length (``core.safe_json``, the
reader GitHub's API answers go through too), every field checked, a bad one skipped.
"""

from __future__ import annotations

import os
import re
import ssl
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone

from vlmpath.core import safe_json
from vlmpath.core.errors import VlmpathError
from vlmpath.engines.base import EngineSpec

INDEX_URL_ENV = "VLMPATH_PYPI_JSON"   # base of the JSON API (a mirror), default PyPI's
PYPI_JSON = "https://pypi.org/pypi"
MAX_INDEX_BYTES = 64 * 2**20          # vllm's JSON is ~10 MB; anything far past it is not an index
_VERSION = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")
_FINAL = re.compile(r"^\d+(\.\d+)*$")


@dataclass(frozen=True)
class Release:
    engine: str
    version: str
    date: datetime          # the release's first upload, UTC

    @property
    def label(self) -> str:
        return f"{self.engine}=={self.version}"

    @property
    def spec(self) -> EngineSpec:
        """The release as the engine spec it is (its name and version were checked when the
        index was read: no second parse)."""
        return EngineSpec("release", self.engine, self.version)

    @property
    def date_ms(self) -> int:
        """asv's ``date``: milliseconds since the epoch."""
        return int(self.date.timestamp() * 1000)


@dataclass(frozen=True)
class Selection:
    """A range ``low..high`` (``versions`` empty) or an explicit list (``low``/``high`` None)."""

    low: str | None = None
    high: str | None = None
    versions: tuple[str, ...] = ()


def version_key(v: str) -> tuple:
    """A sort key good enough for release numbers (``0.5.9 < 0.5.10``; ``rc`` before final)."""
    m = re.match(r"^(\d+(?:\.\d+)*)(.*)$", v)
    if not m:
        return ((), v)
    nums = tuple(int(x) for x in m.group(1).split("."))
    rest = m.group(2)
    # final = 0; pre-releases sort before it, post-releases after it
    rank = -1 if re.match(r"^(a|b|rc)", rest) or ".dev" in rest else (1 if rest.startswith(".post") else 0)
    return (nums, rank, rest)


def _check_version(v: str, text: str) -> str:
    if not _VERSION.match(v):
        raise VlmpathError(f"engine sweep {text!r}: {v!r} is not a release number; give A..B "
                           "(e.g. 0.5.11..0.5.23) or a comma-separated list (0.5.12,0.5.14)")
    return v


def parse_selection(text: str) -> Selection:
    """``A..B``, ``A,B,C`` or ``A`` (see the module docstring)."""
    text = (text or "").strip()
    if ".." in text:
        low, _, high = text.partition("..")
        low, high = _check_version(low.strip(), text), _check_version(high.strip(), text)
        if version_key(low) > version_key(high):
            raise VlmpathError(f"engine sweep {text!r}: the range runs backwards; give it low..high ({high}..{low})")
        return Selection(low=low, high=high)
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise VlmpathError("engine sweep: give the releases, A..B (e.g. 0.5.11..0.5.23) or a list (0.5.12,0.5.14)")
    return Selection(versions=tuple(dict.fromkeys(_check_version(p, text) for p in parts)))


def select(engine: str, selection: Selection, index: dict[str, datetime]) -> list[Release]:
    """The releases ``selection`` names among ``index``'s, oldest upload first."""
    if selection.versions:
        missing = [v for v in selection.versions if v not in index]
        if missing:
            raise VlmpathError(f"engine sweep {engine}: the package index has no release {', '.join(missing)} "
                               f"(it has {len(index)} releases; check the version numbers)")
        chosen = list(selection.versions)
    else:
        lo, hi = version_key(selection.low), version_key(selection.high)
        chosen = [v for v in index if _FINAL.match(v) and lo <= version_key(v) <= hi]
        if not chosen:
            raise VlmpathError(f"engine sweep {engine} {selection.low}..{selection.high}: the package index has "
                               "no final release in that range")
    return sorted((Release(engine, v, index[v]) for v in chosen), key=lambda r: (r.date, version_key(r.version)))


def parse_index(data: object) -> dict[str, datetime]:
    """``{version: first upload}`` from PyPI's JSON; releases without a readable file are left out."""
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise VlmpathError("the package index's JSON has no 'releases' object: is the index URL "
                           f"({INDEX_URL_ENV}) a PyPI-style JSON API?")
    out: dict[str, datetime] = {}
    for version, files in releases.items():
        if not isinstance(version, str) or not _VERSION.match(version) or not isinstance(files, list):
            continue
        dates = []
        for f in files:
            stamp = f.get("upload_time_iso_8601") or f.get("upload_time") if isinstance(f, dict) else None
            if isinstance(stamp, str) and len(stamp) < 40:
                try:
                    d = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                except ValueError:
                    continue
                dates.append(d if d.tzinfo else d.replace(tzinfo=timezone.utc))
        if dates and not any(f.get("yanked") is True for f in files if isinstance(f, dict)):
            out[version] = min(dates)
    return out


def index_releases(package: str, *, timeout: float = 60.0) -> dict[str, datetime]:
    """Every release of ``package`` on the package index, with its first upload date."""
    base = os.environ.get(INDEX_URL_ENV, PYPI_JSON).rstrip("/")
    url = f"{base}/{package}/json"
    cafile = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    context = ssl.create_default_context(cafile=cafile) if cafile and os.path.exists(cafile) else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            body = safe_json.read_stream_capped(resp, f"engine sweep: {url}", MAX_INDEX_BYTES,
                                                "not a package index answer")
    except OSError as exc:
        raise VlmpathError(f"engine sweep: cannot read the package index at {url} ({exc}); check the network, "
                           f"or point {INDEX_URL_ENV} at a mirror, or list releases already measured") from exc
    return parse_index(safe_json.loads(body, f"engine sweep: {url}", f"check {INDEX_URL_ENV}"))
