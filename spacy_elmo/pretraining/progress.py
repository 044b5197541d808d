"""The step counter and the running sums behind each log line (kept in checkpoints)."""
import time
from typing import Any, Dict, Optional

import torch

from .processes import Processes
from .statistics import language_model_scores
from .trainer import StepResult


class Progress:
    """Step counter and the running sums behind each log line (kept in checkpoints)."""

    def __init__(self, *, device: torch.device) -> None:
        self.device = device
        self.step = 0
        self.tokens_seen = 0  # all processes
        self.nonfinite_run = 0
        self.elapsed = 0.0
        self._reset_interval()

    def _reset_interval(self) -> None:
        self.nll = torch.zeros(2, dtype=torch.float64, device=self.device)
        self.tokens = 0
        self.grad_norm = 0.0
        self.steps = 0
        self.skipped = 0
        self.started = time.perf_counter()

    def add(self, result: StepResult) -> None:
        self.step += 1
        self.steps += 1
        if result.finite:
            self.nll += result.nll.double()
            self.tokens += result.n_tokens
            self.grad_norm += result.grad_norm
            self.nonfinite_run = 0
        else:
            self.skipped += 1
            self.nonfinite_run += 1

    def restart_clock(self) -> None:
        self.started = time.perf_counter()

    def exclude(self, seconds: float) -> None:
        """Leave evaluation and checkpoint time out of the throughput."""
        self.started += seconds

    def epoch(self, n_train_tokens: Optional[int]) -> Optional[float]:
        return self.tokens_seen / n_train_tokens if n_train_tokens else None

    def log_record(
        self, processes: Processes, n_train_tokens: Optional[int], optimizer: torch.optim.Optimizer
    ) -> Dict[str, Any]:
        """The interval's averages over every process, then a new interval."""
        totals = processes.sum(torch.cat([self.nll, self.nll.new_tensor([self.tokens])]))
        nll_forward, nll_backward, tokens = totals.tolist()
        seconds = time.perf_counter() - self.started
        self.elapsed += seconds
        self.tokens_seen += int(tokens)
        tokens = max(tokens, 1.0)
        record = {
            "kind": "train",
            "step": self.step,
            "epoch": self.epoch(n_train_tokens),
            "tokens": self.tokens_seen,
            **language_model_scores("train_", nll_forward, nll_backward, tokens),
            "grad_norm": self.grad_norm / max(self.steps - self.skipped, 1),
            "skipped_steps": self.skipped,
            "learn_rate": optimizer.param_groups[0]["lr"],
            "tokens_per_second": tokens / max(seconds, 1e-9),
            "elapsed_seconds": self.elapsed,
        }
        self._reset_interval()
        return record

    def local_state(self) -> Dict[str, Any]:
        return {
            "nll": self.nll.cpu(), "tokens": self.tokens, "grad_norm": self.grad_norm,
            "steps": self.steps, "skipped": self.skipped,
        }

    def shared_state(self) -> Dict[str, Any]:
        return {"tokens_seen": self.tokens_seen, "nonfinite_run": self.nonfinite_run, "elapsed": self.elapsed}

    def load(self, step: int, shared: Dict[str, Any], local: Dict[str, Any]) -> None:
        self.step = step
        self.tokens_seen = shared["tokens_seen"]
        self.nonfinite_run = shared["nonfinite_run"]
        self.elapsed = shared["elapsed"]
        self.nll = local["nll"].to(self.device)
        self.tokens = local["tokens"]
        self.grad_norm = local["grad_norm"]
        self.steps = local["steps"]
        self.skipped = local["skipped"]
