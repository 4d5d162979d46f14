"""vlmpath: benchmarks for the multimodal embedding path of LLM inference engines.

Measuring (``paths``, ``embed``, ``measure``), comparing (``compare``) and rendering
(``render``, ``report``) are separate layers; see ``docs`` in the repository.
"""

__version__ = "0.1.0"
