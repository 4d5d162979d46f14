"""The pull-request flow: both sides measured, compared, profiled, merged across machines, bisected; for vlmpath and for engines."""
