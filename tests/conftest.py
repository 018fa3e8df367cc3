"""The suite runs without the cache of prepared workloads (``KNORM_CACHE=off``, inherited by the
commands it starts): a test's timing or progress lines never depend on what an earlier test or run
left in the user's cache folder. ``tests/walks/test_cache.py`` turns it on in a temporary folder.

Hypothesis runs derandomized (the "ci" profile, the default): each property test tries the same
examples on every run and machine, so the README's test command is green or red for the code, not
for the draw. ``HYPOTHESIS_PROFILE=explore`` searches afresh on each run (run it when you
change an input check; put what it finds into the enumerated cases)."""

import os

from hypothesis import settings

os.environ["KNORM_CACHE"] = "off"

settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
