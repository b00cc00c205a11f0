"""python -m mirrorwatch.grafana_build [--check]"""

import sys

from ..core.extras import MissingExtra, require_extra

try:
    require_extra("grafana", "the Grafana builder")
except MissingExtra as exc:  # exit 2, not 1: under --check, 1 means "a checked-in file differs"
    print(f"grafana_build: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)

from .build import main  # noqa: E402  (after the check: it imports the SDK)

sys.exit(main(sys.argv[1:]))
