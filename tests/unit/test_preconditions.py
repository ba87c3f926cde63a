"""The suite's reruns (``tests/preconditions.py``): with the reruns this project's
``pyproject.toml`` sets, a test whose precondition was unmet runs once more, and only such a
test: a failed check of what the test checks fails at once. Each case is a test file run by a
pytest of its own (``pytester``) under those settings."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests import preconditions

ROOT = Path(__file__).resolve().parents[2]


def _ini(pytester) -> None:
    """This project's rerun settings, and ``tests/preconditions.py``, in ``pytester``'s dir."""
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    ini = options["ini_options"]
    pytester.makeini("[pytest]\nreruns = {}\nonly_rerun =\n{}\n".format(
        ini["reruns"], "".join(f"    {p}\n" for p in ini["only_rerun"])))
    pytester.makepyfile(preconditions=Path(preconditions.__file__).read_text())


def test_an_unmet_precondition_runs_the_test_once_more_and_nothing_else_does(pytester):
    _ini(pytester)
    pytester.makepyfile(test_inner="""
        import itertools
        from preconditions import require

        runs = {name: itertools.count(1) for name in ("met", "unmet", "checked", "never")}

        def test_met_on_the_second_run():
            require(next(runs["met"]) == 2, "first run too slow")

        def test_unmet_twice():
            next(runs["unmet"])
            require(False, ("aborted", 7, "committed", 5))

        def test_a_wrong_verdict():
            next(runs["checked"])
            assert "valid" == "invalid"

        def test_an_unmet_precondition_named_in_a_message_only():
            next(runs["never"])
            raise RuntimeError("PreconditionUnmet: a message is not the exception")

        def test_counts():
            assert [next(c) for c in runs.values()] == [3, 3, 2, 2]
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.parseoutcomes() == {"passed": 2, "failed": 3, "rerun": 2}
    result.stdout.fnmatch_lines(["*PreconditionUnmet: ('aborted', 7, 'committed', 5)*"])
