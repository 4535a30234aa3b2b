"""Benchmarks: workload graphs (synthetic presets and real files), baselines, runner, reports."""

__all__: list[str] = []
