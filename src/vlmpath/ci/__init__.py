"""Plumbing: asv runs, the PR flow, artifact merging and the GitHub API."""
