"""Interrupts that wait for a few statements: `held()` makes Ctrl-C (SIGINT) and SIGTERM that arrive
inside its block take effect when the block ends, so that a temporary folder is made and its name
kept by the code that removes it, with no moment in between in which an interrupt would leave it
behind (the analysis' spill folder, the output's temporary folder).

Python runs signal handlers in the main thread, between two statements, whichever thread the
signal came to (blocking it in the main thread, `pthread_sigmask`, does not hold it while numpy's,
polars' or the pool's threads take it). So the block's handler only notes the signal; at the end
the previous handlers are back and the first signal noted is raised again (`signal.raise_signal`):
the previous handler runs as it would have (the CLI's raises `Interrupted`, Python's own
`KeyboardInterrupt`). Outside the main thread (where no handler can be set) the block does nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """The block runs with SIGINT and SIGTERM noted, not handled; the first one noted is raised again
    when the block ends (also when the block raised: the interrupt's exception then takes its place,
    the block's as its context)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, _frame: object) -> None:
        noted.append(signum)

    before = {s: signal.getsignal(s) for s in INTERRUPTS}
    restorable = {s: h for s, h in before.items() if h is not None}  # None: set outside Python, kept
    for s in restorable:
        signal.signal(s, note)
    try:
        yield
    finally:
        for s, h in restorable.items():
            signal.signal(s, h)
        if noted:
            signal.raise_signal(noted[0])
