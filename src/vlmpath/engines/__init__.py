"""The routine under test: ``reference`` (vlmpath's own model of the engine's path) and real engines."""
