"""The case registry and the code that measures one case; feeds asv, pytest-benchmark and the CLI."""
