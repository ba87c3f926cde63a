"""``wait_until``: the value once the condition holds, a last check at the deadline, and a
timeout that names what was awaited."""

from __future__ import annotations

import pytest

from kafka_chaos.errors import KafkaChaosError
from kafka_chaos.waiting import WaitTimeout, wait_until


class Clock:
    """Sleeps that pass no real time: ``time.monotonic`` moved by hand."""

    def __init__(self, monkeypatch) -> None:
        self.now = 100.0
        monkeypatch.setattr("kafka_chaos.waiting.time.monotonic", lambda: self.now)
        self.slept: list[float] = []

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_the_value_comes_back_as_soon_as_the_condition_holds(monkeypatch) -> None:
    clock = Clock(monkeypatch)
    answers = iter([None, 0, "leader 2"])
    assert wait_until(lambda: next(answers), 5.0, 0.5, "x", clock.sleep) == "leader 2"
    assert clock.slept == [0.5, 0.5]


def test_the_last_check_is_at_the_deadline_and_a_timeout_names_the_wait(monkeypatch) -> None:
    clock = Clock(monkeypatch)
    calls = []

    def never() -> bool:
        calls.append(clock.now)
        return False
    with pytest.raises(WaitTimeout, match=r"^the mount at /m within 1.2 s$") as caught:
        wait_until(never, 1.2, 0.5, "the mount at /m", clock.sleep)
    assert calls == [100.0, 100.5, 101.0, pytest.approx(101.2)]
    assert clock.slept == [0.5, 0.5, pytest.approx(0.2)]
    assert isinstance(caught.value, KafkaChaosError) and caught.value.exit_code == 255
    assert isinstance(caught.value, TimeoutError)


def test_an_error_of_the_condition_ends_the_wait_at_once(monkeypatch) -> None:
    clock = Clock(monkeypatch)

    def died() -> bool:
        raise RuntimeError("the daemon exited with 1")
    with pytest.raises(RuntimeError, match="exited"):
        wait_until(died, 10.0, 1.0, "x", clock.sleep)
    assert clock.slept == []
