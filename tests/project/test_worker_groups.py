"""`make test`'s scheduling (tests/conftest.py): the tests of a WORKER_GROUPS group reach one
pytest-xdist worker, every other test is scheduled on its own."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import WORKER_GROUPS, shared_work_group, worker_group, worker_group_scheduling


class _Worker:
    """Stands in for a pytest-xdist worker: records the indices of the tests sent to it."""

    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.done: set[int] = set()
        self.shutting_down = False

    def send_runtest_some(self, indices) -> None:
        self.sent.extend(indices)

    def send_runtest_all(self) -> None:
        raise AssertionError("every test sent to one worker")

    def shutdown(self) -> None:
        self.shutting_down = True


def _config(n: int):
    options = {"tx": [f"{n}*popen"], "dist": "loadgroup"}
    return SimpleNamespace(
        getvalue=options.get,
        getoption=lambda name, default=None: options.get(name, default),
        option=SimpleNamespace(loadscopereorder=True),
    )


def test_a_group_reaches_one_worker_and_the_rest_spread():
    ids = [
        "tests/project/test_notebooks.py::test_a",
        "tests/emergence_lens/test_cli.py::test_one",
        "tests/interp/report/test_report_browser.py::test_b[main_job]",
        "tests/emergence_lens/test_cli.py::test_two",
        "tests/interp/test_zoom.py::test_c",
        "tests/interp/report/test_report_browser.py::test_d[synthetic]",
        "tests/interp/test_zoom.py::test_e",
        "tests/emergence_lens/test_cli.py::test_three",
    ]
    scheduler = worker_group_scheduling(_config(2))
    workers = [_Worker("gw0"), _Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, ids)
    scheduler.schedule()
    for _ in range(len(ids)):  # each worker finishes a test it holds, then may get more
        for worker in workers:
            pending = [i for i in worker.sent if i not in worker.done]
            if pending:
                worker.done.add(pending[0])
                scheduler.mark_test_complete(worker, pending[0])
    assert scheduler.tests_finished
    where = {ids[i]: w.gateway.id for w in workers for i in w.sent}
    assert sorted(where) == sorted(ids)  # every test ran once
    notebooks = {where[i] for i in ids if worker_group(i) == "notebooks"}
    zoom = {where[i] for i in ids if worker_group(i) == "test_zoom"}
    assert len(notebooks) == 1 and len(zoom) == 1
    assert {where[i] for i in ids if worker_group(i) is None} == {"gw0", "gw1"}  # the others spread


def test_the_groups_cover_the_tests_that_share_a_fixture(request):
    # the collection check (pytest_collection_modifyitems) holds for this very session's tests
    for item in request.session.items:
        group = shared_work_group(item)
        assert group is None or WORKER_GROUPS.get(item.path.name) == group, item.nodeid
    assert worker_group("tests/interp/report/test_report_browser.py::test_x[a::b]") == "notebooks"
    assert worker_group("tests/emergence_lens/test_cli.py::test_x") is None


@pytest.mark.parametrize("dist", ["load", "loadfile", "no"])
def test_other_dist_modes_keep_xdists_own_scheduler(dist):
    import conftest

    config = SimpleNamespace(getvalue={"dist": dist}.get)
    assert conftest.pytest_xdist_make_scheduler(config, None) is None
