"""Where this process trains (rank, number of processes, device) and the few
collective operations a run needs. One process on the CPU or one GPU needs no
process group; under ``torchrun`` every process joins one.
"""
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, List, Optional, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from ..errors import TrainingError, shown

T = TypeVar("T")


@dataclass(frozen=True)
class Processes:
    """This process's place in the run: rank, number of processes, device."""

    rank: int
    world_size: int
    device: torch.device

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, tensor: Tensor) -> Tensor:
        """Sum `tensor` over the processes, in place; returns it."""
        if self.distributed:
            dist.all_reduce(tensor)
        return tensor

    def all_true_on_device(self, flag: Tensor) -> Tensor:
        """Whether `flag` (a 0-d bool tensor) is true on every process, left on the device."""
        if self.distributed:
            flag = flag.to(torch.int32)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            flag = flag.bool()
        return flag

    def gather_to_main(self, local: Any) -> Optional[List[Any]]:
        """Every process's `local`, in rank order, on the main process; None elsewhere."""
        if not self.distributed:
            return [local]
        gathered: Optional[List[Any]] = [None] * self.world_size if self.is_main else None
        dist.gather_object(local, gathered, dst=0)
        return gathered

    def decide_on_main(self, local: Any, decide: Callable[[List[Any]], T]) -> T:
        """Gather `local` to the main process, run `decide` on all of them there
        and give its result to every process. An error `decide` raises is raised
        on every process, so all stop with the same message."""
        gathered = self.gather_to_main(local)
        outcome: List[Any] = [None]
        if self.is_main:
            try:
                outcome = [decide(gathered)]
            except TrainingError as err:
                outcome = [err]
        if self.distributed:
            dist.broadcast_object_list(outcome, src=0)
        if isinstance(outcome[0], TrainingError):
            raise outcome[0]
        return outcome[0]

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()


def setup_processes(device: Optional[torch.device] = None) -> Processes:
    """One process (on `device`, the CPU by default), or the process group
    `torchrun` describes.

    Under torchrun every process uses GPU ``LOCAL_RANK`` when CUDA is available
    (unless `device` is the CPU) and the CPU with the gloo backend otherwise.
    """
    world_size = _environment_number("WORLD_SIZE", 1)
    if world_size > 1:
        _check_torchrun_environment(world_size)
        use_cuda = torch.cuda.is_available() and (device is None or device.type == "cuda")
        device = torch.device("cpu")
        if use_cuda:
            device = torch.device("cuda", _environment_number("LOCAL_RANK", 0))
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if use_cuda else "gloo", timeout=timedelta(hours=2))
        return Processes(dist.get_rank(), dist.get_world_size(), device)
    device = device if device is not None else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return Processes(0, 1, device)


#: What a process of a group needs besides WORLD_SIZE (torchrun sets them; init_process_group reads them).
GROUP_VARIABLES = ("RANK", "MASTER_ADDR", "MASTER_PORT")


def _environment_number(name: str, default: int) -> int:
    """The whole number, at least `default`, that the environment variable `name` holds (`default`: unset)."""
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:  # not a whole number, or of over 4,300 digits
        number = -1
    if number < default:
        raise TrainingError(
            f"{name}={shown(value)} in the environment is not a number of processes or a rank; unset it, or start "
            f"the run with torchrun, which sets it"
        )
    return number


def _check_torchrun_environment(world_size: int) -> None:
    missing = [name for name in GROUP_VARIABLES if name not in os.environ]
    if missing:
        raise TrainingError(
            f"WORLD_SIZE={world_size} is set, but not {', '.join(missing)}: start a run of several "
            f"processes with torchrun (torchrun --nproc_per_node={world_size} -m spacy_elmo pretrain ...), or "
            f"unset WORLD_SIZE for one process"
        )
    _environment_number("RANK", 0)


def shutdown(processes: Processes) -> None:
    """Leave the process group (if any)."""
    if processes.distributed and dist.is_initialized():
        dist.destroy_process_group()
