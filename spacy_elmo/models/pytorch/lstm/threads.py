"""The forward and backward directions of the biLM on their own threads.

On a CPU with two or more threads the two directions run concurrently, one
core each: better than one small matrix multiply split across both cores. The
modes torch keeps per thread (grad, inference, autocast) are carried over.
"""
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional, Tuple, TypeVar

import torch

T = TypeVar("T")

_POOL: Optional[ThreadPoolExecutor] = None


def run_directions_in_threads(run: Callable[[int], T]) -> Tuple[T, T]:
    """``run(0)`` and ``run(1)`` on two threads with half the torch threads each."""
    threads = torch.get_num_threads()
    inference = torch.is_inference_mode_enabled()
    grad = torch.is_grad_enabled()
    autocast = torch.is_autocast_enabled("cpu")
    autocast_dtype = torch.get_autocast_dtype("cpu")

    def in_thread(direction: int) -> T:
        torch.set_num_threads(max(1, threads // 2))
        with torch.inference_mode(inference), torch.set_grad_enabled(grad), torch.autocast(
            "cpu", dtype=autocast_dtype, enabled=autocast
        ):
            return run(direction)

    try:
        first, second = _direction_pool().map(in_thread, (0, 1))
    finally:
        torch.set_num_threads(threads)
    return first, second


def _direction_pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="elmo-direction")
    return _POOL


def _after_fork_in_child() -> None:
    """A forked child (``nlp.pipe(n_process=2)``) has none of the parent's threads.

    Our direction pool is gone, and so is the OpenMP pool: with torch's OpenMP
    build, the child's first multi-threaded op hangs once the parent has run
    one. Like torch's DataLoader workers, the child continues single-threaded.
    """
    global _POOL
    _POOL = None
    torch.set_num_threads(1)


os.register_at_fork(after_in_child=_after_fork_in_child)
