"""Rendering: comments, terminal tables, summaries, charts and the dashboard page. Never measures."""
