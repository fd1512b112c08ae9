"""The capacity report: CloudWatch history against baselines, trends, projected dates and recommendations.

May import exporter.common, exporter.baselines and exporter.aws.
"""
