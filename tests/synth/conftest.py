"""private-pgm imports JAX, which starts threads; a process pool forked after that may deadlock
(tests/walks/test_executors.py forks). So the tests that import it in this process run last."""


def pytest_collection_modifyitems(session, config, items):
    late = [item for item in items if "synth" in item.nodeid.split("::")[0].split("/")[:-1]]
    if late:
        items[:] = [item for item in items if item not in late] + late
