"""Tasks: data, splits, kind and metrics. One task family per file (LRA: the package lra/, a file per task)."""
