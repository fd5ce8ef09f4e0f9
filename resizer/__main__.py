"""`python -m resizer --help`."""

from __future__ import annotations

import sys

from pydantic import ValidationError

from resizer.app import run
from resizer.logs import configure_logging
from resizer.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    try:
        settings = load_settings(argv)
    except ValidationError as error:
        print(f"invalid resizer configuration:\n{error}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    return run(settings)


if __name__ == "__main__":
    sys.exit(main())
