"""The flight recorder's public functions (the recorder itself: :mod:`compat.core.recorder`).

``dump_trace`` writes this rank's recent calls for ``compat trace DIR``; ``comms_log`` starts the
comms log, whose rows and text the other two give (docs/flight_recorder.md).
"""

from compat.core.recorder import comms_log, comms_log_rows, comms_log_text, dump_trace

__all__ = ["comms_log", "comms_log_rows", "comms_log_text", "dump_trace"]
