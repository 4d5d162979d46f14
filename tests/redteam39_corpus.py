"""The red-team corpus of issue 39: new inputs tried as an outsider would, against the rules
the verdict gained (vanished on head, exact acceptance, records that contradict themselves,
the yardstick read by the trusted side, quick by sample counts, the artifact's selection).
``tests/test_redteam39.py`` runs every entry through the real code and counts what held;
docs/hostile-input.md gives the count.
"""

from __future__ import annotations

ACC = "bench_embed.EmbedRoutine.track_accuracy"
P = (("pipeline", "default"), ("preset", "multi_region"))

#: How head can spell "the case base judged is gone": (benchmark, params, value, extra fields).
VANISH: dict[str, tuple[str, tuple, object, dict]] = {
    "trailing-space-name": (ACC + " ", P, 1.0, {}),
    "upper-case-method": (ACC.replace("track_accuracy", "Track_Accuracy"), P, 1.0, {}),
    "greek-omicron": (ACC.replace("Routine", "R\u03bfutine"), P, 1.0, {}),
    "combining-acute": (ACC.replace("accuracy", "accurac\u0301y"), P, 1.0, {}),
    "soft-hyphen": (ACC.replace("accuracy", "accu\u00adracy"), P, 1.0, {}),
    "rtl-override-name": (ACC + "\u202e", P, 1.0, {}),
    "fullwidth-param-value": (ACC, (("pipeline", "default"), ("preset", "\uff4dulti_region")), 1.0, {}),
    "param-key-homoglyph": (ACC, (("pipel\u0456ne", "default"), ("preset", "multi_region")), 1.0, {}),
    "param-order-swapped-keys": (ACC, (("preset", "default"), ("pipeline", "multi_region")), 1.0, {}),
    "param-value-quoted": (ACC, (("pipeline", "'default'"), ("preset", "multi_region")), 1.0, {}),
    "extra-param": (ACC, P + (("cache", "off"),), 1.0, {}),
    "skipped-with-a-value": (ACC, P, None, {"skipped": True}),
    "invalid-inf": (ACC, P, None, {"invalid": "value inf is not finite"}),
    "error-but-value": (ACC, P, 1.0, {"error": "RuntimeError: swallowed"}),
    "missing-entirely": (None, P, None, {}),
}

#: accepted.yaml entries that must be refused (one line, exit 2), each with the reason words.
REFUSED_ENTRIES: dict[str, dict] = {
    "b-star": {"case": "b*", "pr": 7, "reason": "tok/s noise"},
    "module-star": {"case": "bench_embed.*", "pr": 7, "reason": "r"},
    "method-suffix-star": {"case": ACC + "*", "pr": 7, "reason": "r"},
    "leading-star": {"case": "*track_accuracy", "pr": 7, "reason": "r"},
    "question-mark-glob": {"case": ACC[:-1] + "?", "pr": 7, "reason": "r"},
    "homoglyph-name": {"case": ACC.replace("a", "\u0430", 1), "pr": 7, "reason": "r"},
    "fullwidth-name": {"case": ACC.replace("accuracy", "\uff41ccuracy"), "pr": 7, "reason": "r"},
    "unbalanced-params": {"case": ACC + " (preset=*", "pr": 7, "reason": "r"},
    "name-with-newline": {"case": ACC + "\n", "pr": 7, "reason": "r"},
    "commit-7-hex": {"case": ACC, "commit": "deadbee", "reason": "r"},
    "commit-39-hex": {"case": ACC, "commit": "d" * 39, "reason": "r"},
    "commit-41-hex": {"case": ACC, "commit": "d" * 41, "reason": "r"},
    "commit-not-hex": {"case": ACC, "commit": "g" * 40, "reason": "r"},
    "reason-throughput-on-accuracy": {"case": ACC, "pr": 7, "reason": "throughput noise on CPU"},
    "reason-latency-on-accuracy": {"case": ACC, "pr": 7, "reason": "latency flake"},
    "reason-syncs-on-tok": {"case": "bench_embed.EmbedRoutine.track_tok_per_s", "pr": 7, "reason": "one more sync"},
    "metric-key-disagrees": {"case": ACC, "pr": 7, "metric": "syncs", "reason": "r"},
    "no-metric-row": {"case": "bench_embed.EmbedRoutine.track_vibes", "pr": 7, "reason": "r"},
}

#: Records that contradict themselves: fields over a consistent record.
CONTRADICTING: dict[str, dict] = {
    "accuracy-0.75-all-placed": {"accuracy": 0.75},
    "accuracy-1-none-placed": {"placed": 0},
    "five-of-four-placed": {"placed": 5, "accuracy": 1.0},
    "negative-items": {"items": -4, "placed": -4},
    "fractional-placed": {"placed": 2.5, "accuracy": 0.625},
    "more-failed-steps-than-steps": {"failed_steps": 9},
    "failed-step-no-error": {"failed_steps": 1},
    "failed-step-with-speed": {"failed_steps": 1, "error": "RuntimeError: x"},
    "error-with-speed": {"error": "RuntimeError: y"},
    "zero-items-accuracy-half": {"items": 0, "placed": 0, "accuracy": 0.5},
    "negative-syncs": {"syncs": -9},
}

#: Changed paths, as the API could list them, that are the yardstick.
YARDSTICK_PATHS: tuple[str, ...] = (
    ".GitHub/Workflows/bench-pr.yml", "src\\vlmpath\\compare\\verdict.py", "src/vlmpath/paths/../../../benchmarks/x.py",
    "src/vlmpath/paths/x.pth", "PYPROJECT.TOML", "docker-compose.yml", "\uff0egithub/workflows/a.yml",
    "./ci/pr-bench.sh", "/src/vlmpath/pr/flow.py", "src/vlmpath/measure/instrument_check.py",
    "src/vlmpath/core/metrics.py", "src/vlmpath/suite/cases.py", "benchmarks/accepted.yaml", ".ci/run",
    "tests/conftest.py", "src/vlmpath/engines/" + "sitecustomize.py",
)
#: Paths that are the code under test (a PR touching only these moves no yardstick).
UNDER_TEST_PATHS: tuple[str, ...] = (
    "src/vlmpath/paths/encode.py", "ci/../src/vlmpath/paths/inject.py", "docs/ci-security.md", "README.md",
    "src/vlmpath/engines/sglang_adapter.py", "tests/test_compare.py",
)

#: Artifact selections that cut the regressed (accuracy) case base judged.
CUTTING_SELECTIONS: tuple[str, ...] = (
    "track_syncs", "^bench_embed.EmbedRoutine.track_syncs$", "EmbedRoutine.track_s", "nothing-at-all",
    "track_accuracy\\(", "track_syncs|track_tok_per_s",
)
