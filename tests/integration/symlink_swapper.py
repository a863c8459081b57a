"""A process that swaps two names in place (renameat2 RENAME_EXCHANGE) over and over: a
directory and a symlink to somewhere else trade places while a call works on the directory's
name, which is how the mount-safety tests race rosetctl's path checks."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_SWAPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL("libc.so.6", use_errno=True)
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
burst = int(sys.argv[3])
AT_FDCWD, RENAME_EXCHANGE, SYS_renameat2 = -100, 2, 316
print("swapping", flush=True)
while True:
    for _ in range(burst or 1):
        libc.syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
    if burst:
        time.sleep(0.003)
"""


def start_swapper(processes, a: Path, b: Path, burst: int = 0) -> subprocess.Popen:
    """Starts swapping `a` and `b` (under the `processes` fixture, which stops it at the end) and
    returns once it swaps. With `burst` (even, so the names are as they started during a pause),
    it rests 3 ms after each `burst` swaps, so that a call slower than one swap also gets through
    some of the time; without, it never rests."""
    swapper = processes.start([sys.executable, "-c", _SWAPPER, str(a), str(b), str(burst)],
                              stdout=subprocess.PIPE, text=True)
    assert swapper.stdout.readline().strip() == "swapping", "expected the swapper to start"
    return swapper
