"""The kill -9 loop the crash tests share: writers run against a server, the server is
SIGKILLed at a random moment, the writers stop, a new server starts on the same data
directory, a check compares what is stored with what the writers were told, and the next
round begins. Each test supplies its writers and its check; this module owns the loop, so a
fix to the loop (timing, cleanup, the port a `--replSet` member must keep) reaches them all.

Round counts: the e2e suite runs a handful; `SHALE_KILL_ROUNDS=N` overrides the count of the
tests that read it (`rounds(default)`), for the longer runs docs/operations.md describes."""

import os
import random
import signal
import threading
import time
from typing import Callable, Sequence

from conftest import Server
from pymongo import MongoClient


def rounds(default: int) -> int:
    """The round count: `SHALE_KILL_ROUNDS` when set, else `default`."""
    return int(os.environ.get("SHALE_KILL_ROUNDS", default))


# A round's writers: given the server, the round number and the stop flag, the clients they
# use (closed after the kill) and the functions to run on threads until the flag is set.
Writers = Callable[[Server, int, threading.Event], tuple[Sequence[MongoClient], Sequence[Callable[[], None]]]]


def kill_loop(
    server: Server,
    restart: Callable[[int], Server],
    writers: Writers,
    check: Callable[[Server, int], None],
    n_rounds: int,
    rng: random.Random,
    run_s: tuple[float, float] = (0.5, 1.5),
) -> None:
    """Runs `n_rounds` rounds starting from the running `server`: writers for a random
    `run_s` interval, SIGKILL, join the writers, `restart(port)` (the killed server's port),
    `check(new_server, round)`. Stops whichever server is running at the end, or when a
    check or a start fails."""
    try:
        for round_no in range(n_rounds):
            stop = threading.Event()
            clients, bodies = writers(server, round_no, stop)
            threads = [threading.Thread(target=body) for body in bodies]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(*run_s))
            port = server.port
            server.stop(signal.SIGKILL)
            stop.set()
            for t in threads:
                t.join()
            for c in clients:
                c.close()
            server = restart(port)
            check(server, round_no)
    finally:
        server.stop()
