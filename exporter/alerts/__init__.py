"""The alert catalog rendered into Prometheus rules and CloudFormation, and the direct CloudWatch alarm sync.

May import exporter.common, exporter.baselines and exporter.aws (the alarm API); never the Redis side or the service.
"""
