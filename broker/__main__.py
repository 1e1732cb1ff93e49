"""``python -m broker``: the same arguments as ``chronolog serve``."""

from __future__ import annotations

import sys

from broker.server import main

if __name__ == "__main__":
    sys.exit(main())
