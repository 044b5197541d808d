"""Optimizer steps of the biLM language model on one process (a DistributedDataParallel replica under torchrun).

Whether a step is finite stays on the device: a fused optimizer skips the update of a step that is not, and the loop
reads it with a log line's other figures (:meth:`Progress.settle`).
"""
import math
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterable, Optional, Sequence

import torch
from torch import Tensor, nn
from torch.autograd.graph import increment_version

from ..models.pytorch.char_ids import TokenIds
from .assembly import negative_samples
from .config import OptimizerConfig, PretrainConfig
from .corpus import Sentence
from .language_model import BiLMLanguageModel, LMBatch, n_predictions
from .precision import autocast, autocast_dtype
from .processes import Processes
from .schedule import learn_rate_at
from .softmax import LogUniformSampler, SampledCandidates
from .vocab import Vocabulary


@dataclass(frozen=True)
class HostStep:
    """A step's input as the host prepares it: the batch, the negatives of a sampled
    softmax, and the predictions per direction."""

    batch: LMBatch
    candidates: Optional[SampledCandidates]
    n_tokens: int


def prepare_step(sentences: Sequence[Sentence], token_ids: TokenIds, vocab: Vocabulary) -> HostStep:
    """The host's part of a step but the negatives, which need the trainer's sampler
    (:meth:`Trainer.with_negatives`): a function of the sentences alone, for batch workers."""
    return HostStep(LMBatch.of_sentences(sentences, token_ids, vocab), None, n_predictions(sentences))


@dataclass
class StepResult:
    """One optimizer step, on the device: summed NLL per direction *Shape:* ``(2,)``,
    whether the loss and gradient were finite on every process (0-d, bool; if not, the
    update was skipped), the gradient norm (0-d); and the tokens."""

    nll: Tensor
    n_tokens: int
    finite: Tensor
    grad_norm: Tensor


def build_optimizer(
    config: OptimizerConfig, parameters: Iterable[nn.Parameter], device: torch.device = torch.device("cpu"),
) -> torch.optim.Optimizer:
    """The optimizer, fused (one kernel for every parameter, and a step skipped on the
    device when its ``found_inf`` is set) where torch has a fused one for `device`."""
    parameters = list(parameters)
    if device.type in ("cpu", "cuda"):
        try:
            return _optimizer(config, parameters, fused=True)
        except RuntimeError:  # older torch: no fused Adagrad on a GPU
            pass
    return _optimizer(config, parameters, fused=None)


def _optimizer(config: OptimizerConfig, parameters: Sequence[nn.Parameter], fused: Optional[bool]):
    if config.name == "adagrad":
        optimizer: torch.optim.Optimizer = torch.optim.Adagrad(
            parameters, lr=config.learn_rate, initial_accumulator_value=config.initial_accumulator,
            weight_decay=config.weight_decay, fused=fused,
        )
    else:
        optimizer = torch.optim.Adam(
            parameters, lr=config.learn_rate, betas=(config.beta1, config.beta2), eps=config.eps,
            weight_decay=config.weight_decay, fused=fused,
        )
    optimizer.register_load_state_dict_pre_hook(_as_built)
    return optimizer


def _as_built(optimizer: torch.optim.Optimizer, state: Dict[str, Any]) -> Dict[str, Any]:
    """A saved state loads into the optimizer as it was built (fused or not, whatever the
    run that saved it was)."""
    fused = optimizer.defaults["fused"]
    return {**state, "param_groups": [{**group, "fused": fused} for group in state["param_groups"]]}


class Trainer:
    """Optimizer steps of a :class:`BiLMLanguageModel` on one process (the model moves to the process's device).

    `negative_samples`: per step of a sampled softmax (None: the full softmax); `seed`: seeds the negative sampler,
    with the rank; `precision`: "auto" (bfloat16 autocast on a GPU), "bf16" or "fp32"; `gradient_scale` multiplies the
    mean loss per token before backpropagation; `grad_clip`: the gradient norm's clip (0: no clipping)."""

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
        self.optimizer = build_optimizer(optimizer, self.model.parameters(), self.device)
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
        return self.step(self.prepare(batch))

    def prepare(self, batch: Sequence[Sentence]) -> HostStep:
        """The host's part of a step: everything the device needs, computed from the sentences."""
        return self.with_negatives(prepare_step(batch, self.model.bilm.token_ids, self.vocab))

    def with_negatives(self, step: HostStep) -> HostStep:
        """`step` with the negatives of a sampled softmax drawn for it (the sampler's next)."""
        return replace(step, candidates=self.sampler.sample()) if self.sampler is not None else step

    def step(self, prepared: HostStep) -> StepResult:
        """The device's part of a step; it reads nothing back from the device (except,
        where torch has no fused optimizer for it, whether to update)."""
        self.model.train()
        batch = prepared.batch.to(self.device)
        candidates = prepared.candidates.to(self.device) if prepared.candidates is not None else None
        with autocast(self.autocast_dtype, self.device):
            nll = self.network(batch, None, candidates)
        loss = nll.sum() / (2 * prepared.n_tokens)
        (loss * self.gradient_scale).backward()
        clip = self.grad_clip if self.grad_clip > 0 else math.inf
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        finite = self.processes.all_true_on_device(torch.isfinite(loss.detach()) & torch.isfinite(grad_norm))
        if self.optimizer.defaults["fused"]:
            self.optimizer.found_inf = (~finite).float()  # type: ignore[attr-defined]
            self.optimizer.step()
            # Fused kernels write the weights unseen by their version counters, which
            # prediction's caches of derived weights watch (prepacked products, token vectors).
            for parameter in self.model.parameters():
                increment_version(parameter)
        elif finite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepResult(nll.detach(), prepared.n_tokens, finite, grad_norm.detach())
