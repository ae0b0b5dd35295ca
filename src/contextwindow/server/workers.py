"""Several server processes on one listening socket: ``contextwindow proxy --workers N``.

The socket is bound once, in the parent, and each worker is forked with it and accepts from it
(the kernel hands each connection to one of them). Each worker makes its own application (its own
store connection, its own conversations in memory): the workers share only the ledger, as workers
on several machines do (see docs/proxy.md, *Many workers, one ledger*). A worker that dies is
started again; SIGINT or SIGTERM to the parent stops them all. Fork is POSIX only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable

from .app import HttpApp
from .runner import run

__all__ = ["run_workers"]


def run_workers(make_app: Callable[[], HttpApp], sock: socket.socket, workers: int) -> int:
    """Serve ``make_app()`` on ``sock`` in ``workers`` forked processes until interrupted; the exit
    status (1 when a worker failed as it started: it is not started again, and all stop)."""
    children: dict[int, float] = {}
    stopping = False
    failed = 0

    def start() -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                run(make_app(), sock)
            except KeyboardInterrupt:
                pass
            except BaseException:
                code = 1
                sys.excepthook(*sys.exc_info())
            finally:
                os._exit(code)
        children[pid] = time.monotonic()

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    for _ in range(workers):
        start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        started = children.pop(pid, 0.0)
        if stopping:
            continue
        if os.waitstatus_to_exitcode(status) != 0 and time.monotonic() - started < _STARTING:
            failed = 1  # it could not start: neither will the next one
            stop(signal.SIGTERM, None)
        else:
            start()  # a worker died: the others serve meanwhile, and a new one takes its place
    return failed


_STARTING = 5.0
"""Seconds after its start within which a worker's failure is taken as failing to start."""
