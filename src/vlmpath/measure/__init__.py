"""Measuring instruments and inputs: platform, timing, syncs, workloads, encoders, cache, shared memory, fidelity."""
