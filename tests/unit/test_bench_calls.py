"""The profile of one run counts calls made in every thread, not only the caller's: the program
is served from gRPC threads of the driver's process (``benchmarks.calls``)."""

from __future__ import annotations

import cProfile
import threading
from concurrent import futures

from benchmarks.calls import EveryThread, calls_of


def counted(x: int) -> int:
    return x + 1


def test_calls_in_threads_started_while_profiling_are_counted_with_the_callers() -> None:
    threads = EveryThread()
    with threads.running():
        counted(0)
        worker = threading.Thread(target=lambda: [counted(i) for i in range(3)])
        worker.start()
        worker.join()
        with futures.ThreadPoolExecutor(max_workers=2) as pool:  # as the gRPC server serves
            assert sorted(pool.map(counted, range(4))) == [1, 2, 3, 4]
    counted(0)  # after the profile: not counted
    assert calls_of(threads.stats(), counted) == 1 + 3 + 4


def test_a_function_never_called_counts_zero() -> None:
    threads = EveryThread()
    with threads.running():
        pass
    assert calls_of(threads.stats(), counted) == 0


def test_a_thread_profile_that_counted_nothing_is_left_out() -> None:
    threads = EveryThread()
    with threads.running():
        counted(0)
    threads.profiles.append(cProfile.Profile())  # one thread's, which counted no call
    assert calls_of(threads.stats(), counted) == 1
