"""Per node type baselines: the shipped table, its derivation from benchmark results, and a benchmark run of our own.

May import exporter.common and exporter.redis (the benchmark reads INFO).
"""
