from __future__ import annotations

from hypothesis import settings

# The suite runs in two processes on a loaded machine (scripts/test.sh): an example's time
# says little there, so no per-example deadlines.
settings.register_profile("squall", deadline=None, print_blob=True)
settings.load_profile("squall")
