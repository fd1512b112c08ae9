"""``python3 -m exporter.config``: the README's settings table, from the declarations."""

from .declared import markdown_table

print(markdown_table(), end="")
