"""Backbones. One family per file; shared parts live in ``models.layers``."""
