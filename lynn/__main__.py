"""``python -m lynn`` is the ``lynn`` command."""

from __future__ import annotations

import sys

from lynn.cli import main

sys.exit(main())
