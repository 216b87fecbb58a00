"""Bounding a blocking call by compat's own clock (compat.monitored_barrier's messages)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def completes_within(
    call: Callable[[], object], seconds: float, done: threading.Event | None = None
) -> bool:
    """Run the blocking ``call`` on a daemon thread; True if it returned within ``seconds``.

    ``done`` (a new one if not given) is set whenever the call returns, also after the bound:
    a caller can still learn that a late call completed. A call that raised did not complete.

    Not the backends' own ``wait(timeout)``: when a Gloo point-to-point wait times out, Gloo
    closes every connection of the group ("Application timeout caused pair closure"), so the
    other messages could no longer go; and ``Work.is_completed()`` of a Gloo send/recv stays
    False until waited on (both seen on torch 2.13). MindSpore's calls take no timeout at all.
    """
    event = threading.Event() if done is None else done

    def run() -> None:
        try:
            call()
        except Exception:  # a failed call is one that did not complete
            return
        event.set()

    threading.Thread(target=run, name="compat-timed-p2p", daemon=True).start()
    return event.wait(max(seconds, 0.0))
