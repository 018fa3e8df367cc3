"""The suite runs without the cache of prepared workloads (``KNORM_CACHE=off``, inherited by the
commands it starts): a test's timing or progress lines never depend on what an earlier test or run
left in the user's cache folder. ``tests/walks/test_cache.py`` turns it on in a temporary folder."""

import os

os.environ["KNORM_CACHE"] = "off"
