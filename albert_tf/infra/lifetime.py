"""Worker processes that end with their parent, from their first moment: no TF, no Keras.

`die_with_parent(parent)` asks the kernel to SIGKILL this process when its parent dies
(Linux prctl PR_SET_PDEATHSIG), then compares getppid() with the expected parent: a
parent that died before the prctl is seen there, so there is no window in which the
worker outlives it; a watchdog thread covers systems without prctl. A pool's parent
sets `PARENT_ENV` (`mark_children`) and `albert_tf/__init__` calls
`follow_parent_from_environment` first thing, so a spawned worker follows its parent
before it imports TensorFlow (seconds, on a loaded machine), not after.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PARENT_ENV = "ALBERT_TF_DIE_WITH_PARENT"  # the pid a spawned worker must not outlive
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_following: set[int] = set()


def die_with_parent(parent: int, poll_seconds: float = 1.0) -> None:
    """Ends this process when process `parent` dies, even by SIGKILL (idempotent)."""
    if parent in _following:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the check and the watchdog alone
        pass
    if os.getppid() != parent:  # it died before the prctl: the signal will never come
        os._exit(1)
    _following.add(parent)

    def watch():
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def mark_children() -> None:
    """Makes the processes this one spawns from now on follow it (`PARENT_ENV`)."""
    os.environ[PARENT_ENV] = str(os.getpid())


def follow_parent_from_environment() -> None:
    """In a spawned multiprocessing worker: `die_with_parent` of the pid its parent set.
    The variable is removed, so the worker's own children are not bound to their
    grandparent; other processes that inherit it (a command the parent runs) ignore it."""
    # sys.orig_argv: spawn's prepare() has replaced sys.argv with the parent's by now.
    if "--multiprocessing-fork" not in getattr(sys, "orig_argv", sys.argv):  # not a worker
        return
    value = os.environ.pop(PARENT_ENV, "")
    if value.isdigit():
        die_with_parent(int(value))
