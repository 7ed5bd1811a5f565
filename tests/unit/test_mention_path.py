"""The mention's path is counted as its docstring says (tests/bench/mention_path.py): a visit per run of entries
in one file, a return per visit to a file already left, the plumbing left out on request, and a connection's
transactions cut apart at the endpoint."""

from __future__ import annotations

from tests.bench.mention_path import ENDPOINT, figures, pieces


def test_consecutive_entries_are_one_visit_and_a_file_left_and_met_again_is_a_return() -> None:
    path = ["a.py", "a.py", "b.py", "a.py", "c.py", "b.py", "b.py"]
    got = figures(path)
    assert got["visits"] == ["a.py", "b.py", "a.py", "c.py", "b.py"]
    assert (got["files"], got["returns"]) == (3, 2)


def test_the_plumbing_is_left_out_on_request_and_its_neighbours_merge() -> None:
    path = ["appservice/x.py", "engine/store/runs.py", "appservice/x.py", "engine/clock.py", "engine/run/y.py"]
    assert figures(path)["returns"] == 1
    got = figures(path, plumbing=False)
    assert got["visits"] == ["appservice/x.py", "engine/run/y.py"]
    assert (got["files"], got["returns"]) == (2, 0)


def test_a_task_serving_two_transactions_is_cut_at_the_endpoint() -> None:
    endpoint, name = ENDPOINT
    entered = [(endpoint, name), ("a.py", "f"), (endpoint, "other"), (endpoint, name), ("b.py", "g")]
    assert pieces(entered) == [[endpoint, "a.py", endpoint], [endpoint, "b.py"]]
