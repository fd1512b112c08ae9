import sys

from exporter.cli.main import main

sys.exit(main())
