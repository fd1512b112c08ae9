"""The long-running exporter: the target set, the collectors that join Redis, AWS and baselines at
scrape time, the HTTP server, its web config and the status page.

May import everything but exporter.cli.
"""
