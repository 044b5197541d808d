"""Keep freed memory in the process heap, for long runs that allocate the same large blocks every step.

glibc maps blocks above its mmap threshold afresh and unmaps them when freed, so each CPU pretraining step faulted its
large temporaries (the sampled softmax's logits: 268 MB) in again: a third of the CPU time, measured on 2 cores.
Reusing the heap keeps the peak memory instead, which is what a training run wants.
"""
import ctypes
import ctypes.util
import sys

# mallopt parameters, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_NEVER_TRIM = 2**31 - 1  # an int: the largest trim threshold mallopt takes


def keep_freed_memory() -> bool:
    """Ask glibc to serve large blocks from the heap and never return freed memory to
    the OS. True if it was applied (Linux with glibc); elsewhere nothing changes."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; musl's stub returns 0 and changes nothing.
    return mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM) == 1
