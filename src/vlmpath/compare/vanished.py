"""Which cases base judged have no usable value on head, and which head name looks like them?

Base's cases decide what must be judged (design.md, "What the verdict trusts"): a case
with a usable value on base (a finite number, not skipped, not failed) and none on head is
a regression, "vanished on head", whatever the reason: the row is missing, skipped (asv's
NaN), not a number, or renamed (the benchmark or a parameter). The pull request writes
head's package and results; it cannot make a regressed case disappear into "not judged".

Names are compared as people see them: ``name_key`` folds Unicode compatibility forms
(NFKC: fullwidth letters, ligatures), case, invisible characters and a confusable skeleton
(Cyrillic and Greek look-alikes, digit/letter look-alikes) before two names count as the
same. A head case whose key equals a vanished base case's, or that differs only in its
parameters, is named beside it as the near-miss ("near-miss on head: ...").

Head's new cases are shown and never fail the check (``compare.comparison``: ``NEW`` rows
are left out of the "incomplete" arithmetic).

Entry points: ``vanished_row`` (one base row with no usable head counterpart ->
its failing row, or None when base had nothing usable either) and ``near_miss`` (the head
case that looks like it), called from ``compare.verdict._compare_machine`` for a base row
whose head row is missing, skipped or not a number.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping

from vlmpath.compare.comparison import Comparison, Verdict
from vlmpath.compare.records import Metric

#: The prefix of every vanished row's reason (render and tests key on it).
VANISHED = "vanished on head"

# A confusable skeleton in the spirit of Unicode TR39: the look-alikes a benchmark name
# could carry, mapped to the ASCII letter they imitate. Cyrillic and Greek letters that
# render like Latin ones, and the digit/letter pairs of most fonts.
_CONFUSABLES = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
    "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "ԁ": "d",
    "ԛ": "q", "ԝ": "w", "ӏ": "l", "һ": "h", "ɡ": "g",
    # Greek
    "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "γ": "y", "η": "n", "μ": "u", "ς": "c", "σ": "o",
    # digits and letters that read alike
    "0": "o", "1": "l", "|": "l", "5": "s",
    # dashes and underscores people do not tell apart
    "-": "_", "‐": "_", "‑": "_", "–": "_", "—": "_", "−": "_",
})


def name_key(name: str) -> str:
    """``name`` as compared for sameness: NFKC, without invisible characters (format,
    control), case-folded, then the confusable skeleton."""
    text = unicodedata.normalize("NFKC", str(name))
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cf", "Cc", "Mn"))
    text = text.casefold().replace("i̇", "i")
    return unicodedata.normalize("NFKC", text).translate(_CONFUSABLES)


def _shown(benchmark: str, params: Iterable[tuple[str, str]]) -> str:
    params = tuple(params)
    return benchmark + (" (" + ", ".join(f"{k}={v}" for k, v in params) + ")" if params else "")


def near_miss(base: Metric, head_cases: Mapping[tuple[str, tuple[tuple[str, str], ...]], Metric]) -> str | None:
    """The head case that looks like ``base``'s (same name key and parameter keys, or the
    same benchmark with other parameters), shown as ``name (k=v)``; None when none does."""
    want_name = name_key(base.benchmark)
    want_params = tuple((name_key(k), name_key(v)) for k, v in base.params)
    same_name = None
    for (bench, params), m in sorted(head_cases.items()):
        if (bench, params) == base.case:
            continue
        if name_key(bench) != want_name:
            continue
        if tuple((name_key(k), name_key(v)) for k, v in params) == want_params:
            return _shown(bench, params)  # the same name but for look-alike characters
        if same_name is None and len(params) == len(base.params):
            same_name = _shown(bench, params)  # a parameter renamed or revalued
    return same_name


def usable(m: Metric | None) -> bool:
    """A value that was judged: present, finite and in range, not skipped, not failed."""
    return m is not None and m.ok


def vanished_row(base: Metric, head: Metric | None, why: str,
                 head_cases: Mapping[tuple[str, tuple[tuple[str, str], ...]], Metric]) -> Comparison | None:
    """The failing row for a case base judged and head did not (``why``: "missing",
    "skipped", "not a number"...); None when base's value was not usable either (then the
    case is "not judged" as before, never vanished)."""
    if not usable(base) or usable(head):
        return None
    reason = f"{VANISHED}: {why}"
    miss = near_miss(base, head_cases)
    if miss is not None:
        reason += f"; near-miss on head: {miss}"
    return Comparison(machine=base.machine, benchmark=base.benchmark, params=base.params, unit=base.unit,
                      base=base.value, head=None, verdict=Verdict.NEWLY_FAILING, reason=reason)
