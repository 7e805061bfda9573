"""create-data's worker processes: a pool that dies with its parent and fails in one line.

`executor(processes, initializer, initargs)` is a spawn process pool (or, for one
process, an executor that runs each task at once in this process). Its workers die
with the parent, even on `kill -9`, from their first import (`albert_tf.infra.lifetime`). A
worker whose set-up fails keeps the error and raises it from each of its tasks
(`raise_if_failed`), so the parent gets that one exception through the task's future,
instead of a traceback printed by every worker and a broken pool. A worker that dies
(killed, out of memory) becomes `WorkerError` in the parent (`result`). The parent checks
every input it can before it starts a pool (create_data.load_vocabulary), so set-up
failures are rare.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

from albert_tf.errors import UserError
from albert_tf.infra import lifetime
from albert_tf.infra.lifetime import die_with_parent

_FAILED: list[BaseException] = []  # this process's set-up error, if any


class WorkerError(UserError):
    """A worker process died (killed, out of memory): not the input's fault, exit 1."""

    exit_status = 1


def _start(initializer: Callable[..., None], initargs: tuple, parent: int | None) -> None:
    """A worker's set-up: `initializer(*initargs)`, its error kept for the tasks."""
    _FAILED.clear()
    if parent is not None:
        die_with_parent(parent)
    try:
        initializer(*initargs)
    except Exception as e:  # raised by each task instead (raise_if_failed): one line
        _FAILED.append(e)


def raise_if_failed() -> None:
    """Called first by every task: re-raises this worker's set-up error, if any."""
    if _FAILED:
        raise _FAILED[0]


def executor(processes: int, initializer: Callable[..., None],
             initargs: tuple = ()) -> concurrent.futures.Executor:
    """`processes` spawned workers, each set up by `initializer(*initargs)`; for 1, this
    process (set up now, tasks run at once on submit)."""
    if processes == 1:
        _start(initializer, initargs, None)
        return InlineExecutor()
    # spawn, not fork: the parent has TensorFlow loaded, whose threads do not survive a fork.
    lifetime.mark_children()  # each worker follows this process from its first import
    return concurrent.futures.ProcessPoolExecutor(
        processes, mp_context=multiprocessing.get_context("spawn"), initializer=_start,
        initargs=(initializer, initargs, os.getpid()))


def result(future: concurrent.futures.Future, what: str) -> Any:
    """`future.result()`; a worker that died while making `what` is `WorkerError`."""
    try:
        return future.result()
    except concurrent.futures.process.BrokenProcessPool:
        raise WorkerError(f"a worker process ended abruptly while making {what} (killed, or "
                          "out of memory?); the finished shards are kept: rerun the same "
                          "command to resume") from None


class InlineExecutor(concurrent.futures.Executor):
    """Runs submitted work at once in this process (processes=1)."""

    def submit(self, fn, /, *args, **kwargs):
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # delivered through the future, as a pool would
            future.set_exception(e)
        return future
