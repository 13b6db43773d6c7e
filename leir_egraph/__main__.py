"""``python -m leir_egraph`` is the ``leir`` command."""

import sys

from .cli import main

sys.exit(main())
