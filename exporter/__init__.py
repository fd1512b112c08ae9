"""elasticache-exporter: Redis and ElastiCache metrics for Prometheus, with benchmark-derived baselines."""

__version__ = "0.1.0"
