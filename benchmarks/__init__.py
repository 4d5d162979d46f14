"""asv benchmark suite for vlmpath: one module per path of the multimodal embedding routine.

Cases come from ``vlmpath.suite.cases``; run with ``vlmpath run`` (see ``src/vlmpath/runner/run.py``).
"""
