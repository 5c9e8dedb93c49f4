"""Every test runs in its own temporary directory: a command without ``--run-dir`` writes
``runs/<timestamp>`` below the working directory, which must not be the checkout.

Ray: the tests that run on Ray share one local instance (fixture ``shared_ray``), started by
the first of them. The tests marked ``ray`` run first, so the shared instance is stopped as
soon as they are done, not left idle beside the rest. A test that needs a cluster of its own
(two nodes, a fresh process tree, another process's Ray) is marked ``cluster`` and runs last.
With two test processes (pytest-xdist, the default ``-n 2``) all of these run in one of them,
in that order, while the other runs the rest: never two Ray instances at once."""

from __future__ import annotations

import signal
import sys

import pytest

# The Ctrl-C tests press Ctrl-C as a terminal does. A shell that starts the test run in the
# background without job control ignores SIGINT for it, and every process the tests start
# would inherit that: take Python's own handler back, as a run from a terminal has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True, scope="session")
def _own_finish_costs(tmp_path_factory: pytest.TempPathFactory):
    """The finish reserves a run learns (``$GAPSTOP_CACHE/finish_costs.json``) are the test
    session's own, also in the processes it starts: a reserve that the machine's earlier runs
    learned under load would shorten the tests' short runs. A test that sets it keeps its own."""
    import os

    if "GAPSTOP_CACHE" in os.environ:
        yield
        return
    os.environ["GAPSTOP_CACHE"] = str(tmp_path_factory.mktemp("gapstop-cache"))
    yield
    os.environ.pop("GAPSTOP_CACHE", None)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:  # one test process runs every Ray test, one after the other (-n 2 --dist loadgroup)
        if item.get_closest_marker("ray") is not None or item.get_closest_marker("cluster") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))

    def group(item: pytest.Item) -> int:
        if item.get_closest_marker("cluster") is not None:
            return 2
        return 0 if item.get_closest_marker("ray") is not None else 1

    items.sort(key=group)  # stable: the order within each group is kept


@pytest.fixture(scope="session")
def _ray_stopped_at_the_end():
    yield
    import ray

    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture()
def shared_ray(_ray_stopped_at_the_end):
    """The shared local Ray instance (2 CPUs); a run's coordinator is gone once the test ends."""
    from tests import ray_session

    ray_session.start()
    yield
    ray_session.wait_until_the_coordinator_is_gone()


@pytest.fixture(autouse=True)
def _own_cluster(request: pytest.FixtureRequest):
    if request.node.get_closest_marker("cluster") is None:
        if request.node.get_closest_marker("ray") is None and "ray" in sys.modules:
            import ray

            if ray.is_initialized():  # the Ray tests are done (they run first)
                ray.shutdown()
        yield
        return
    import ray

    if ray.is_initialized():
        ray.shutdown()
    yield
    if ray.is_initialized():
        ray.shutdown()
