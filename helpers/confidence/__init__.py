"""Confidence methods: one module each, each returning one row per (checkpoint, question)."""
