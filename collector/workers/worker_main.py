"""Inside a worker process: build the handler, handle what is given in order, report, exit
with the receiving process.

The worker builds its own handler (`factory(shard)`, a picklable top-level callable) and calls
`handler.handle(signal, data)` for every item it is given, in order, reporting each done (with
the error, if any); on stop it calls `handler.close()` and sends back what that returns. A
handler may also have `idle()` (called when nothing arrived for `idle_interval_s`, so a worker
keeps its clock: windows close, writes happen) and `attach(send)` (`send(message)` reports to
the receiving process). A worker exits when the process that started it dies (SIGKILL
included): it is never left running on its own.

Stop signals (SIGTERM, SIGINT, SIGHUP) are not a worker's to act on: a stop of the whole process
group (systemd's `KillMode=control-group`, `kill -- -PGID`, Ctrl-C in a terminal) reaches the
workers too, and the receiving process decides what a stop means, tells each worker to drain
and waits for it. The pool starts its fork server and workers with these signals blocked
(`stop_signals_blocked`), so they are never delivered from the first instruction on, and a
worker also ignores them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal as signals
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, Literal, Protocol

Signal = Literal["traces", "logs", "control"]
STOP = None  # the last item a worker is given
# What a supervisor or a terminal sends to stop a process group.
STOP_SIGNALS = frozenset({signals.SIGTERM, signals.SIGINT, signals.SIGHUP})


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Block the stop signals in the calling thread while it starts processes and threads:
    they inherit the mask (a fork keeps it, and so does the exec that starts a fork server),
    so no stop signal ever reaches them. The caller's own signals are delivered once the
    block is lifted, not lost."""
    previous = signals.pthread_sigmask(signals.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signals.pthread_sigmask(signals.SIG_SETMASK, previous)


def ignore_stop_signals() -> None:
    """In a worker: a stop signal that reaches it anyway (a start method that resets the mask)
    does nothing; the receiving process tells it when to drain."""
    for signum in STOP_SIGNALS:
        signals.signal(signum, signals.SIG_IGN)


class Handler(Protocol):
    def handle(self, signal: Signal, data: bytes) -> None: ...

    def close(self) -> Any: ...  # or close(left=N): N requests were not handled (a stop)


HandlerFactory = Callable[[int], Handler]


def die_with_parent(receiver: int) -> None:
    """Exit when the receiving process dies, however it dies: when it is the parent (spawn),
    the kernel sends SIGKILL on Linux; a thread watches too. A worker forked by a fork server
    has the fork server as its parent, which stays up as long as any of its workers do: the
    thread watches the receiving process itself, so a killed collector leaves no workers (nor,
    once they are gone, its fork server) behind."""
    parent = os.getppid()
    if parent == 1 or (parent != receiver and not _alive(receiver)):
        os._exit(1)
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signals.SIGKILL))  # PR_SET_PDEATHSIG

    def watch() -> None:
        while os.getppid() == parent and (parent == receiver or _alive(receiver)):
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie, dead and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError), open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    return True


def worker_main(
    shard: int,
    factory: HandlerFactory,
    inbox: Any,
    outbox: Any,
    parent: int = 0,
    drain_until: Any = None,
) -> None:
    """A worker process: handle requests in order until told to stop. Once a stop has set
    `drain_until` (a shared value: wall-clock seconds) and that time has passed, requests are
    no longer handled, only counted (control items still are), and `close(left=N)` is told
    how many were left."""
    ignore_stop_signals()
    if parent:
        die_with_parent(parent)
    handler = factory(shard)
    attach = getattr(handler, "attach", None)
    if attach is not None:
        attach(lambda message: outbox.put(("report", message)))
    idle = getattr(handler, "idle", None)
    interval = float(getattr(handler, "idle_interval_s", 0.2))
    left = 0
    while True:
        if idle is None:
            item = inbox.get()
        else:
            try:
                item = inbox.get(timeout=interval)
            except queue.Empty:
                idle()
                continue
        if item is STOP:
            break
        seq, signal, data = item
        if (
            signal != "control"
            and drain_until is not None
            and drain_until.value
            and time.time() > drain_until.value
        ):
            left += 1
            outbox.put(("done", seq, ""))
            continue
        error = ""
        try:
            handler.handle(signal, data)
        except Exception:
            error = traceback.format_exc(limit=5)
        outbox.put(("done", seq, error))
    # A handler that can be told what was left takes `left` (see `Handler`).
    close: Any = handler.close
    outbox.put(("closed", close(left=left) if left else close()))
    outbox.close()
    outbox.join_thread()
