"""Several requests in flight, answers in input order: `albert-tf predict --concurrency N`.

The backends make blocking HTTP/gRPC calls (or call a SavedModel, which releases the GIL
while it runs), so a thread pool is enough. At most `concurrency` items are submitted
ahead of the one being waited for; each result is yielded as soon as it and every item
before it are done, so an answer waits only for the answers before it and the input is
read no further ahead than the window.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def in_order(call: Callable[[Item], Result], items: Iterable[Item],
             concurrency: int) -> Iterator[tuple[Item, Result]]:
    """(item, call(item)) for each of `items`, in their order, `concurrency` calls at a time.

    The first failure (in input order) is raised once the items before it are yielded;
    calls not yet started are cancelled, those running are left to finish on their own
    (each is bounded by its backend's --timeout).
    """
    if concurrency == 1:  # no threads: today's behaviour, tracebacks in this thread
        for item in items:
            yield item, call(item)
        return
    pool = futures.ThreadPoolExecutor(max_workers=concurrency,
                                      thread_name_prefix="albert-tf-predict")
    window: collections.deque = collections.deque()
    try:
        for item in items:
            window.append((item, pool.submit(call, item)))
            if len(window) >= concurrency:
                head, future = window.popleft()
                yield head, future.result()
        while window:
            head, future = window.popleft()
            yield head, future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
