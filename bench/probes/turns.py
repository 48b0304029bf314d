"""A probe's row of variants timed in turns: their seconds in every round and the
read-bandwidth fraction of each one's best, printed on one line."""

from __future__ import annotations

from collections.abc import Callable


def turns_row(fmt: str, batch: int, tokens: int, moved: int, times: dict[str, list[float]],
              read_bytes_per_s: float) -> dict:
    """The JSON row of ``times`` (variant → seconds a call, a round each) for ``moved`` bytes
    a call, after printing it."""
    row = {"format": fmt, "batch": batch, "tokens": tokens, "bytes": moved, "seconds": times,
           "fraction_of_read_bw": {n: moved / min(t) / read_bytes_per_s
                                   for n, t in times.items()}}
    print(f"{fmt} B={batch} T={tokens}: " + "; ".join(
        f"{name} {' '.join(f'{x * 1e6:.1f}' for x in t)} µs "
        f"{row['fraction_of_read_bw'][name]:.1%}" for name, t in times.items()))
    return row


def in_turns(rounds: int, calls: dict[str, Callable[[], tuple[float, int]]]
             ) -> tuple[dict[str, list[float]], int]:
    """Each of ``calls`` (variant → a timing: seconds a call, bytes moved) once a round, in
    turns, ``rounds`` times: the seconds by variant, and the bytes moved (the last call's; the
    variants move the same bytes)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    moved = 0
    for _ in range(rounds):
        for name, call in calls.items():
            t, moved = call()
            times[name].append(t)
    return times, moved
