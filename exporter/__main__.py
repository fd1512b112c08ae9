import sys

from exporter.cli.main import entry

sys.exit(entry())
