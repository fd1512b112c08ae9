"""Talking to one Redis node: addresses, the connection and its pipelined scrape, INFO parsing and its field table, replication and heartbeats.

May import exporter.common only.
"""
