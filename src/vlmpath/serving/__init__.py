"""Serving: a real OpenAI-compatible server driven with image requests built from the presets."""
