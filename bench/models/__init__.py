"""Backbones. One family per file; shared parts live in ``bench.models.layers``."""
