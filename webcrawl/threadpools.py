"""One-thread pools for the blocking work beside the reactor (a store, a writer, a probe).

Their threads are daemon threads.  A crawl forced to stop (a second Ctrl-C) never runs
its pipelines' ``close_spider``, so nobody stops their pools; Twisted's pool threads are
not daemons, and the interpreter then waits for them at exit for ever.  A daemon thread
is dropped at exit instead: what it was writing was not acknowledged, so the frontier
hands those pages out again (a stop that is not forced still drains and stops each pool).
"""

from __future__ import annotations

import threading
from typing import Any

from twisted.python.threadpool import ThreadPool


def _daemon_thread(*args: Any, **kwargs: Any) -> threading.Thread:
    thread = threading.Thread(*args, **kwargs)
    thread.daemon = True
    return thread


def one_thread_pool(name: str) -> ThreadPool:
    """A pool of one daemon thread (started by the caller, as any ``ThreadPool``)."""
    pool = ThreadPool(minthreads=1, maxthreads=1, name=name)
    pool.threadFactory = _daemon_thread  # type: ignore[assignment]
    return pool
