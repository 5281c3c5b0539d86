"""``python -m kernelhub.cli``: the ``kernelhub`` command."""

import sys

from . import main

sys.exit(main())
