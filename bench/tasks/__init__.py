"""Tasks: data, splits, kind and metrics. One task family per file."""
