"""``python -m bench.cli``: the command line, as ``bench`` and ``python -m bench``."""

import sys

from . import main

sys.exit(main())
