"""``python -m residlab`` is the ``residlab`` command."""

import sys

from residlab.cli import main

sys.exit(main())
