"""``python3 -m exporter.config``: the settings table of docs/configuration.md, from the declarations."""

from .declared import markdown_table

print(markdown_table(), end="")
