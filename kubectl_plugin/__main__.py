"""`python -m kubectl_plugin` (the same as `kubectl exclusive-placement`)."""

from __future__ import annotations

import sys

from kubectl_plugin.cli import main

if __name__ == "__main__":
    sys.exit(main())
