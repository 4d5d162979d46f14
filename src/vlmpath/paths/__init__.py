"""Competing strategies for each stage of the embedding path, one registry per module."""
