"""The step counter and the running sums behind each log line (kept in checkpoints)."""
import time
from typing import Any, Dict, List, Optional, Tuple

import torch

from .processes import Processes
from .statistics import language_model_scores
from .trainer import StepResult


class Progress:
    """Step counter and the running sums behind each log line (kept in checkpoints).

    A step's figures stay on the device until :meth:`settle` reads those of every step
    since the last call at once (the loop does at each log line and checkpoint): the
    training steps between never wait for the device.
    """

    def __init__(self, *, device: torch.device) -> None:
        self.device = device
        self.step = 0
        self.tokens_seen = 0  # all processes
        self.nonfinite_run = 0
        self.elapsed = 0.0
        self._unsettled: List[StepResult] = []
        self._reset_interval()

    def _reset_interval(self) -> None:
        self.nll = [0.0, 0.0]
        self.tokens = 0
        self.grad_norm = 0.0
        self.steps = 0
        self.skipped = 0
        self.started = time.perf_counter()

    def add(self, result: StepResult) -> None:
        self.step += 1
        self.steps += 1
        self._unsettled.append(result)

    def settle(self) -> List[Tuple[int, int]]:
        """Read the figures of the steps since the last call from the device (one copy) into
        the sums; returns each skipped step (its loss or gradient was not finite) with the
        number of such steps in a row up to it."""
        results, self._unsettled = self._unsettled, []
        if not results:
            return []
        figures = torch.cat([
            torch.stack([r.nll for r in results]).double().flatten(),
            torch.stack([r.grad_norm for r in results]).double(),
            torch.stack([r.finite for r in results]).double(),
        ]).tolist()
        n = len(results)
        skipped = []
        for i, result in enumerate(results):
            if figures[3 * n + i]:
                self.nll[0] += figures[2 * i]
                self.nll[1] += figures[2 * i + 1]
                self.tokens += result.n_tokens
                self.grad_norm += figures[2 * n + i]
                self.nonfinite_run = 0
            else:
                self.skipped += 1
                self.nonfinite_run += 1
                skipped.append((self.step - n + 1 + i, self.nonfinite_run))
        return skipped

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
        self.settle()
        totals = processes.sum(torch.tensor([*self.nll, self.tokens], dtype=torch.float64, device=self.device))
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
        self.settle()
        return {
            "nll": torch.tensor(self.nll, dtype=torch.float64), "tokens": self.tokens, "grad_norm": self.grad_norm,
            "steps": self.steps, "skipped": self.skipped,
        }

    def shared_state(self) -> Dict[str, Any]:
        return {"tokens_seen": self.tokens_seen, "nonfinite_run": self.nonfinite_run, "elapsed": self.elapsed}

    def load(self, step: int, shared: Dict[str, Any], local: Dict[str, Any]) -> None:
        self.step = step
        self.tokens_seen = shared["tokens_seen"]
        self.nonfinite_run = shared["nonfinite_run"]
        self.elapsed = shared["elapsed"]
        self.nll = local["nll"].tolist()
        self.tokens = local["tokens"]
        self.grad_norm = local["grad_norm"]
        self.steps = local["steps"]
        self.skipped = local["skipped"]
