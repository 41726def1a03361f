"""What a partition's reader has in hand: one source's batches one at a time, a run's record
alone, and a read position that never passes a message not yet handled."""

from __future__ import annotations

from stepwatch.fleet._partition import IN_FLIGHT, Flight


class Channel:
    def __init__(self) -> None:
        self.acked: list[int] = []

    def basic_ack(self, tag: int) -> None:
        self.acked.append(tag)


def test_one_source_at_a_time_and_a_record_alone() -> None:
    flight = Flight(Channel())
    assert flight.may_take("a")
    flight.take(0, 100, "a")
    assert not flight.may_take("a") and flight.may_take("b")
    assert not flight.may_take(None)  # a run's record waits for what is in hand
    flight.take(1, 101, "b")
    flight.settle(0, True)
    flight.settle(1, True)
    flight.take(2, 102, None)
    assert not flight.may_take("c")  # and what comes after it waits for it


def test_the_position_stops_below_what_is_in_hand_or_was_left() -> None:
    channel = Channel()
    flight = Flight(channel)
    for offset, source in enumerate("abcd"):
        flight.take(offset, 100 + offset, source)
    assert flight.settle(2, True) is None  # 0 and 1 still in hand
    assert flight.settle(0, True) == 0
    assert flight.settle(1, False) == 0  # left unhandled (stopped): the position stays below it
    assert flight.settle(3, True) == 0
    assert channel.acked == [102, 100, 101, 103]


def test_no_more_than_its_bound_in_hand() -> None:
    flight = Flight(Channel())
    for offset in range(IN_FLIGHT):
        flight.take(offset, offset, f"s{offset}")
    assert not flight.may_take("another")
