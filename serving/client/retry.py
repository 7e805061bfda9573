"""Asking a server again: bounded, jittered exponential backoff for `albert-tf predict`.

Only a `backends.TransientServerError` (HTTP 429/503, gRPC UNAVAILABLE or
DEADLINE_EXCEEDED, a connection refused or reset) is retried; any other failure is
final at once. Attempt k (k = 1, 2, ...) waits a uniform random time in
[0, min(MAX_WAIT_S, BASE_WAIT_S * 2**(k-1))] ("full jitter": many clients that failed
together do not come back together), and the waits of one request add up to at most
MAX_TOTAL_WAIT_S; past that, or past `--retries` attempts, the last error is raised.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from .backends import TransientServerError

BASE_WAIT_S = 0.5
MAX_WAIT_S = 10.0
MAX_TOTAL_WAIT_S = 60.0

T = TypeVar("T")


class RetryCounter:
    """The number of retries made so far, shared by the threads of one run."""

    def __init__(self):
        self._lock = threading.Lock()
        self.count = 0

    def add(self) -> None:
        with self._lock:
            self.count += 1


def backoff_s(attempt: int, rng: random.Random | None = None) -> float:
    """The wait before retry number `attempt` (1-based): full jitter, capped."""
    ceiling = min(MAX_WAIT_S, BASE_WAIT_S * 2 ** (attempt - 1))
    return (rng or random).uniform(0.0, ceiling)


def with_retries(call: Callable[[], T], retries: int, counter: RetryCounter | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """`call()`, asked again up to `retries` times while it raises TransientServerError.

    Raises:
      TransientServerError: the last one, when the attempts or the total wait ran out.
      Anything else `call` raises, at once.
    """
    waited = 0.0
    for attempt in range(1, retries + 2):
        try:
            return call()
        except TransientServerError as e:
            wait = backoff_s(attempt)
            if attempt > retries or waited + wait > MAX_TOTAL_WAIT_S:
                if attempt == 1:
                    raise
                raise TransientServerError(f"{e} (gave up after {attempt - 1} "
                                           f"retr{'y' if attempt == 2 else 'ies'})") from None
        waited += wait
        if counter is not None:
            counter.add()
        sleep(wait)
    raise AssertionError("unreachable")  # the loop returns or raises
