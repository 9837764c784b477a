"""LispM's benchmarks: `make bench` runs `python -m tests.bench` (see README.md)."""
