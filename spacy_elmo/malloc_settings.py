"""Keep freed memory in the process heap, for long runs that allocate the same large
blocks every step.

A pretraining step on the CPU allocates the same large temporaries again and again (the
sampled softmax's logits alone: 16,384 predictions x 4,097 words x 4 bytes = 268 MB).
glibc serves blocks above its mmap threshold (at most 32 MB) with a fresh `mmap` and
unmaps them when they are freed, so every step the kernel maps those pages in again, one
page fault per 4 kB: measured on a 2-core machine, a third of the run's CPU time went to
the kernel. With mmap off and no trimming, freed blocks stay in the heap and the next
step reuses them. The process keeps its peak memory instead of giving it back between
steps, which is what a training run wants.
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
