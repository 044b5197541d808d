"""Optimizer steps of the biLM language model on one process (a
DistributedDataParallel replica under torchrun)."""
import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import torch
from torch import Tensor, nn

from ..models.pytorch.char_ids import batch_to_char_ids
from .assembly import negative_samples
from .config import OptimizerConfig, PretrainConfig
from .corpus import Sentence
from .language_model import BiLMLanguageModel, n_predictions, target_ids
from .precision import autocast, autocast_dtype
from .processes import Processes
from .schedule import learn_rate_at
from .softmax import LogUniformSampler
from .vocab import Vocabulary


@dataclass
class StepResult:
    """One optimizer step: summed NLL per direction *Shape:* ``(2,)``, tokens, finiteness."""

    nll: Tensor
    n_tokens: int
    finite: bool
    grad_norm: float


def build_optimizer(config: OptimizerConfig, parameters: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    parameters = list(parameters)
    if config.name == "adagrad":
        return torch.optim.Adagrad(
            parameters, lr=config.learn_rate, initial_accumulator_value=config.initial_accumulator,
            weight_decay=config.weight_decay,
        )
    return torch.optim.Adam(
        parameters, lr=config.learn_rate, betas=(config.beta1, config.beta2), eps=config.eps,
        weight_decay=config.weight_decay,
    )


class Trainer:
    """Optimizer steps of a :class:`BiLMLanguageModel` on one process.

    :param model: the language model; moved to the process's device.
    :param optimizer: the optimizer and its learning-rate schedule.
    :param negative_samples: negatives per step of a sampled softmax (None: the full softmax).
    :param seed: seeds the negative sampler, with the process's rank.
    :param precision: "auto" (bfloat16 autocast on a GPU), "bf16" or "fp32".
    :param gradient_scale: the mean loss per token is multiplied by this before backpropagation.
    :param grad_clip: the gradient norm is clipped to this (0: no clipping).
    """

    def __init__(
        self, model: BiLMLanguageModel, vocab: Vocabulary, processes: Processes, *, optimizer: OptimizerConfig,
        negative_samples: Optional[int] = None, seed: int = 0, precision: str = "auto",
        gradient_scale: float = 1.0, grad_clip: float = 0.0,
    ) -> None:
        self.processes = processes
        self.device = processes.device
        self.vocab = vocab
        self.schedule = optimizer
        self.gradient_scale = gradient_scale
        self.grad_clip = grad_clip
        self.model = model.to(self.device)
        self.sampler: Optional[LogUniformSampler] = None
        if negative_samples is not None:
            self.sampler = LogUniformSampler(len(vocab), negative_samples, seed=[seed, processes.rank, 1])
        self.optimizer = build_optimizer(optimizer, self.model.parameters())
        self.network: nn.Module = self.model
        if processes.distributed:
            self.network = nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device] if self.device.type == "cuda" else None,
                broadcast_buffers=False,
            )
        self.autocast_dtype = autocast_dtype(precision, self.device)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True

    @classmethod
    def from_config(
        cls, model: BiLMLanguageModel, vocab: Vocabulary, processes: Processes, config: PretrainConfig
    ) -> "Trainer":
        """A trainer with a run's settings: optimizer, softmax, seed, precision, gradient scale and clipping."""
        training = config.training
        return cls(
            model, vocab, processes, optimizer=config.optimizer,
            negative_samples=negative_samples(config.softmax, len(vocab)), seed=config.seed,
            precision=training.precision, gradient_scale=training.gradient_scale, grad_clip=training.grad_clip,
        )

    def set_learn_rate(self, step: int, max_steps: int) -> None:
        """The schedule's learning rate for the step after `step` steps."""
        rate = learn_rate_at(self.schedule, step, max_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = rate

    def train_step(self, batch: Sequence[Sentence]) -> StepResult:
        """Forward, backward, clip and (when every process's loss is finite) update."""
        self.model.train()
        char_ids = batch_to_char_ids(batch).to(self.device, non_blocking=True)
        targets = target_ids(batch, self.vocab).to(self.device, non_blocking=True)
        candidates = self.sampler.sample().to(self.device) if self.sampler is not None else None
        n_tokens = n_predictions(batch)
        with autocast(self.autocast_dtype, self.device):
            nll = self.network(char_ids, targets, candidates)
        loss = nll.sum() / (2 * n_tokens)
        (loss * self.gradient_scale).backward()
        clip = self.grad_clip if self.grad_clip > 0 else math.inf
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        finite = self.processes.all_true(torch.isfinite(loss.detach()) & torch.isfinite(grad_norm))
        if finite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepResult(nll.detach(), n_tokens, finite, float(grad_norm))
