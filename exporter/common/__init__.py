"""Small pieces every part shares: the error classes, the YAML reader, metric families and the text exposition, child processes, progress lines.

Imports nothing else of the package.
"""
