"""What the command lines do when the reader of their output goes away.

`affinec-opt x.mlir | head` closes the pipe after ten lines; the next write raises
`BrokenPipeError`. Unix tools die quietly of SIGPIPE then, and the shell sees exit
status 141 (128 + SIGPIPE): `broken_pipe_exit` does the same without a message.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys

BROKEN_PIPE_STATUS = 128 + signal.SIGPIPE
"""The status a shell reports for a tool killed by SIGPIPE."""


def broken_pipe_exit() -> int:
    """Stop writing to the closed standard output; the exit status to return.

    Python flushes `sys.stdout` once more at exit, which would fail again and print
    "Exception ignored ... BrokenPipeError": the closed descriptor is pointed at
    /dev/null first.
    """
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return BROKEN_PIPE_STATUS
