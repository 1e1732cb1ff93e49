"""``python -m client.cli`` runs the same command line as ``chronolog``."""

import sys

from client.cli import main

sys.exit(main())
