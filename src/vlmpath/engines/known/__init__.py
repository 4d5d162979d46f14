"""Which engines ship with vlmpath? One module each, defining ``ENGINE`` (an ``EngineEntry``).

``vlmpath.engines.registry`` walks this package: adding an engine is one module here
(named like the engine) plus its import-chain data file; nothing else lists engines.
"""
