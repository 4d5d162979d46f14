"""Comparing: typed results read back from disk, thresholds, and base-vs-head verdicts."""
