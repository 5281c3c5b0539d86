"""``python -m kernelhub_serve``: the same as ``kernelhub serve``."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
