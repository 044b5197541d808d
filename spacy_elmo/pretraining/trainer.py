"""Training steps and held-out evaluation of the biLM language model on one process
(a DistributedDataParallel replica under torchrun)."""
import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import ContextManager, Dict, Iterable, Optional, Sequence

import torch
from torch import Tensor, nn

from ..models.pytorch.bilm import ElmoBiLM
from ..models.pytorch.char_ids import batch_to_char_ids
from ..models.pytorch.options import BiLMOptions
from .config import OptimizerConfig, PretrainConfig
from .corpus import Sentence, batches_by_tokens
from .errors import ConfigError
from .objective import BiLMLanguageModel, n_predictions, target_ids
from .processes import Processes
from .schedule import learn_rate_at
from .softmax import LMSoftmax, LogUniformSampler
from .statistics import perplexity
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


def uses_sampled_softmax(config: PretrainConfig, vocab_size: int) -> bool:
    kind = config.softmax.kind
    sampled = kind == "sampled" or (kind == "auto" and vocab_size > config.softmax.max_full_vocab)
    if sampled and config.softmax.n_negative_samples >= vocab_size:
        raise ConfigError(
            f"softmax.n_negative_samples ({config.softmax.n_negative_samples}) must be smaller than "
            f"the vocabulary ({vocab_size} words); use softmax.kind = \"full\" for small vocabularies"
        )
    return sampled


class Trainer:
    """Training steps and held-out evaluation of a :class:`BiLMLanguageModel` on one process.

    :param model: the language model; moved to the process's device.
    """

    def __init__(
        self, model: BiLMLanguageModel, vocab: Vocabulary, config: PretrainConfig, processes: Processes
    ) -> None:
        self.processes = processes
        self.device = processes.device
        self.vocab = vocab
        self.config = config
        self.model = model.to(self.device)
        self.sampler: Optional[LogUniformSampler] = None
        if uses_sampled_softmax(config, len(vocab)):
            self.sampler = LogUniformSampler(
                len(vocab), config.softmax.n_negative_samples, seed=[config.seed, processes.rank, 1]
            )
        self.optimizer = build_optimizer(config.optimizer, self.model.parameters())
        self.network: nn.Module = self.model
        if processes.distributed:
            self.network = nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device] if self.device.type == "cuda" else None,
                broadcast_buffers=False,
            )
        precision = config.training.precision
        self.autocast_dtype = (
            torch.bfloat16 if precision == "bf16" or (precision == "auto" and self.device.type == "cuda") else None
        )
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True

    def autocast(self) -> ContextManager:
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def set_learn_rate(self, step: int, max_steps: int) -> None:
        """The schedule's learning rate for the step after `step` steps."""
        rate = learn_rate_at(self.config.optimizer, step, max_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = rate

    def train_step(self, batch: Sequence[Sentence]) -> StepResult:
        """Forward, backward, clip and (when every process's loss is finite) update."""
        self.model.train()
        char_ids = batch_to_char_ids(batch).to(self.device, non_blocking=True)
        targets = target_ids(batch, self.vocab).to(self.device, non_blocking=True)
        candidates = self.sampler.sample().to(self.device) if self.sampler is not None else None
        n_tokens = n_predictions(batch)
        with self.autocast():
            nll = self.network(char_ids, targets, candidates)
        loss = nll.sum() / (2 * n_tokens)
        (loss * self.config.training.gradient_scale).backward()
        clip = self.config.training.grad_clip
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), clip if clip > 0 else math.inf)
        finite = self.processes.all_true(torch.isfinite(loss.detach()) & torch.isfinite(grad_norm))
        if finite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepResult(nll.detach(), n_tokens, finite, float(grad_norm))

    @torch.no_grad()
    def evaluate(self, sentences: Sequence[Sentence]) -> Dict[str, float]:
        """Held-out perplexity with the full softmax, per direction and averaged (bilm-tf).

        Every process scores its own sentences; the sums are combined across processes.
        """
        self.model.eval()
        totals = torch.zeros(3, dtype=torch.float64, device=self.device)
        ordered = sorted(sentences, key=len)
        for batch in batches_by_tokens(ordered, self.config.training.eval_tokens_per_batch):
            char_ids = batch_to_char_ids(batch).to(self.device)
            targets = target_ids(batch, self.vocab).to(self.device)
            with self.autocast():
                nll = self.model(char_ids, targets)
            totals[:2] += nll.double()
            totals[2] += n_predictions(batch)
        nll_forward, nll_backward, n_tokens = self.processes.sum(totals).tolist()
        n_tokens = max(n_tokens, 1.0)
        forward = perplexity(nll_forward, n_tokens)
        backward = perplexity(nll_backward, n_tokens)
        return {
            "dev_loss": (nll_forward + nll_backward) / (2 * n_tokens),
            "dev_perplexity_forward": forward,
            "dev_perplexity_backward": backward,
            "dev_perplexity": (forward + backward) / 2,
            "dev_tokens": int(n_tokens),
        }


def build_model(options: BiLMOptions, vocab_size: int, *, dropout: float) -> BiLMLanguageModel:
    """A randomly initialised biLM and softmax (seed torch first for reproducibility)."""
    bilm = ElmoBiLM(options)
    return language_model(bilm, LMSoftmax(vocab_size, options.projection_dim), dropout)


def language_model(bilm: ElmoBiLM, softmax: LMSoftmax, dropout: float) -> BiLMLanguageModel:
    """The biLM and softmax as one model, with `dropout` between and after the LSTM layers."""
    bilm.set_dropout(dropout)
    return BiLMLanguageModel(bilm, softmax, output_dropout=dropout)
