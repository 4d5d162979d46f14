"""The gate's checks of itself: instruction counts under callgrind, planted slowdowns, trust rounds, the GPU smoke check."""
