from __future__ import annotations

import os

from hypothesis import settings

# CI machines are slow and noisy: no per-example deadlines, a fixed budget of examples.
settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")
