"""Benchmarks that compare this package with torch.nn side by side (run: python -m benchmarks)."""
