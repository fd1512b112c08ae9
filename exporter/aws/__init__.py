"""AWS: the counted API client, ElastiCache discovery, CloudWatch queries and the background monitor that polls them.

May import exporter.common only; boto3 is loaded only when AWS is used.
"""
