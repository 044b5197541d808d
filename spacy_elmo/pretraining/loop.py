"""The pretraining run: processes, vocabulary, model, training steps, evaluation, checkpoints.

One process on the CPU or one GPU needs nothing special; under ``torchrun`` every
process trains a DistributedDataParallel replica on its own share of the corpus.
"""
import json
import logging
import math
import os
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from itertools import islice
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist
from torch import Tensor, nn
from wasabi import msg

from ..models.pytorch.bilm import ElmoBiLM
from ..models.pytorch.char_ids import batch_to_char_ids
from ..models.pytorch.options import BiLMOptions
from ..models.pytorch.original_format import load_bilm, save_bilm
from ..util import atomic_output_path
from .checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint
from .config import OptimizerConfig, PretrainConfig
from .corpus import BatchStream, CorpusReader, Sentence, TextSplitter, batches_by_tokens, resolve_corpus_files
from .errors import CheckpointError, ConfigError, TrainingError
from .metrics import METRICS_NAME, PLOT_NAME, MetricsLog, plot_perplexity
from .objective import BiLMLanguageModel, n_predictions, target_ids
from .softmax import SOFTMAX_NAME, LMSoftmax, LogUniformSampler, load_softmax, save_softmax
from .vocab import Vocabulary

logger = logging.getLogger(__name__)

VOCAB_NAME = "vocab.txt"
CONFIG_NAME = "config.cfg"
STATS_NAME = "corpus_stats.json"
PathLike = Union[str, Path]

# Rows of the full softmax evaluated at once, times the vocabulary size (bounds eval memory).
_EVAL_LOGITS_PER_CHUNK = 1 << 24


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


def setup_processes(gpu_id: Optional[int] = None) -> Processes:
    """One process (CPU, or GPU `gpu_id`), or the process group `torchrun` describes.

    Under torchrun every process uses GPU ``LOCAL_RANK`` when CUDA is available
    (unless ``gpu_id`` is -1) and the CPU with the gloo backend otherwise.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1:
        use_cuda = torch.cuda.is_available() and (gpu_id is None or gpu_id >= 0)
        device = torch.device("cpu")
        if use_cuda:
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if use_cuda else "gloo", timeout=timedelta(hours=2))
        return Processes(dist.get_rank(), dist.get_world_size(), device)
    if gpu_id is None or gpu_id < 0:
        return Processes(0, 1, torch.device("cpu"))
    if not torch.cuda.is_available() or gpu_id >= torch.cuda.device_count():
        raise TrainingError(f"--gpu-id {gpu_id}: no such CUDA device (use -1 for the CPU)")
    torch.cuda.set_device(gpu_id)
    return Processes(0, 1, torch.device("cuda", gpu_id))


@dataclass
class StepResult:
    """One optimizer step: summed NLL per direction *Shape:* ``(2,)``, tokens, finiteness."""

    nll: Tensor
    n_tokens: int
    finite: bool
    grad_norm: float


def build_optimizer(config: OptimizerConfig, parameters) -> torch.optim.Optimizer:
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

    def _deterministic_dropout(self, training: bool) -> None:
        # On CPU the biLM may run its two directions in two threads; their dropout
        # masks would then come from the shared generator in a racy order, and a
        # resumed run would no longer repeat the uninterrupted one.
        lstm = self.model.bilm.lstm
        if hasattr(lstm, "parallel_directions"):
            lstm.parallel_directions = not (training and lstm.dropout > 0)

    def autocast(self):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def train_step(self, batch: Sequence[Sentence]) -> StepResult:
        """Forward, backward, clip and (when every process's loss is finite) update."""
        self.model.train()
        self._deterministic_dropout(True)
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
        finite = torch.isfinite(loss.detach()) & torch.isfinite(grad_norm)
        if self.processes.distributed:
            finite = finite.to(torch.int32)
            dist.all_reduce(finite, op=dist.ReduceOp.MIN)
        finite = bool(finite)
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
        self._deterministic_dropout(False)
        totals = torch.zeros(3, dtype=torch.float64, device=self.device)
        chunk_rows = max(256, _EVAL_LOGITS_PER_CHUNK // len(self.vocab))
        ordered = sorted(sentences, key=len)
        for batch in batches_by_tokens(ordered, self.config.training.eval_tokens_per_batch):
            char_ids = batch_to_char_ids(batch).to(self.device)
            targets = target_ids(batch, self.vocab).to(self.device)
            with self.autocast():
                nll = self.model(char_ids, targets, chunk_rows=chunk_rows)
            totals[:2] += nll.double()
            totals[2] += n_predictions(batch)
        if self.processes.distributed:
            dist.all_reduce(totals)
        nll_forward, nll_backward, n_tokens = totals.tolist()
        n_tokens = max(n_tokens, 1.0)
        forward = math.exp(nll_forward / n_tokens)
        backward = math.exp(nll_backward / n_tokens)
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
    return _language_model(bilm, LMSoftmax(vocab_size, options.projection_dim), dropout)


def _language_model(bilm: ElmoBiLM, softmax: LMSoftmax, dropout: float) -> BiLMLanguageModel:
    bilm.lstm.dropout = dropout
    return BiLMLanguageModel(bilm, softmax, output_dropout=dropout)


def export_model(model: BiLMLanguageModel, vocab: Vocabulary, output_dir: PathLike) -> None:
    """Write the original-format biLM (options.json, weights.hdf5), softmax and vocabulary."""
    output_dir = Path(output_dir)
    save_bilm(model.bilm, output_dir)
    save_softmax(model.softmax, output_dir / SOFTMAX_NAME)
    vocab.to_disk(output_dir / VOCAB_NAME)


def count_corpus(sentences) -> Tuple[Counter, int, int]:
    """Word counts, sentences and words of a sentence stream (the vocabulary pass)."""
    counts: Counter = Counter()
    n_sentences = n_words = 0
    for sentence in sentences:
        counts.update(sentence)
        n_sentences += 1
        n_words += len(sentence)
    return counts, n_sentences, n_words


def corpus_stats(counts: Counter, n_sentences: int, n_words: int, vocab: Vocabulary) -> Dict[str, Any]:
    covered = sum(count for word, count in counts.items() if word in vocab)
    return {
        "n_sentences": n_sentences,
        "n_words": n_words,
        "n_tokens": n_words + n_sentences,
        "n_distinct_words": len(counts),
        "vocab_size": len(vocab),
        "oov_rate": 1.0 - covered / max(n_words, 1),
    }


def unigram_perplexity(
    counts: Counter, n_sentences: int, vocab: Vocabulary, sentences: Sequence[Sentence]
) -> float:
    """Held-out perplexity of the training text's unigram model: the baseline to beat.

    Maximum likelihood over the same predictions as the biLM (words and one
    sentence end each; words outside the vocabulary share `<UNK>`'s count);
    a prediction never seen in training counts as seen once.
    """
    total = sum(counts.values()) + n_sentences
    unknown = sum(count for word, count in counts.items() if word not in vocab)
    log_total = math.log(total)
    nll, n = -len(sentences) * (math.log(max(n_sentences, 1)) - log_total), len(sentences)
    for sentence in sentences:
        for word in sentence:
            count = counts.get(word, 0) if word in vocab else unknown
            nll -= math.log(max(count, 1)) - log_total
        n += len(sentence)
    return math.exp(nll / max(n, 1))


class PretrainRun:
    """Everything one `pretrain` invocation does, on every process."""

    def __init__(
        self, config: PretrainConfig, output_dir: PathLike, processes: Processes, *,
        resume: bool = False, init_from: Optional[PathLike] = None,
    ) -> None:
        self.config = config
        self.output_dir = Path(output_dir)
        self.processes = processes
        self.resume = resume
        self.init_from = Path(init_from) if init_from is not None else None
        # A run's softmax.hdf5 and vocab.txt sit beside its weights.
        self.init_dir = None
        if self.init_from is not None:
            self.init_dir = self.init_from if self.init_from.is_dir() else self.init_from.parent
        self.checkpoint_path = self.output_dir / CHECKPOINT_NAME
        self.metrics = MetricsLog(self.output_dir / METRICS_NAME)
        corpus = config.corpus
        self.splitter = TextSplitter(
            tokenizer=corpus.tokenizer, split_sentences=corpus.split_sentences, max_window=corpus.max_window
        )
        self.train_files = resolve_corpus_files(corpus.train, setting="corpus.train")
        self.dev_files = resolve_corpus_files(corpus.dev, setting="corpus.dev") if corpus.dev else []

    def say(self, text: str) -> None:
        if self.processes.is_main:
            msg.info(text)

    def run(self) -> Dict[str, Any]:
        config, processes = self.config, self.processes
        checkpoint = self._prepare_output_dir()
        dev_all = self._dev_sentences()
        vocab, stats = self._vocabulary(checkpoint, dev_all)
        if processes.is_main:
            vocab.to_disk(self.output_dir / VOCAB_NAME)
            with atomic_output_path(self.output_dir / CONFIG_NAME) as tmp:
                tmp.write_text(config.to_str(), encoding="utf8")
        torch.manual_seed(config.seed)
        model = self._model(vocab, checkpoint)
        trainer = Trainer(model, vocab, config, processes)
        tokens_per_batch = max(1, config.training.tokens_per_step // processes.world_size)
        stream = BatchStream(
            CorpusReader(
                self.train_files, self.splitter, fmt=config.corpus.format, text_field=config.corpus.text_field,
                seed=config.seed, rank=processes.rank, world_size=processes.world_size, name="corpus.train",
            ),
            tokens_per_batch=tokens_per_batch, shuffle_buffer=config.corpus.shuffle_buffer,
            sort_window=config.training.sort_window, seed=[config.seed, processes.rank, 2],
        )
        torch.manual_seed(config.seed * 7919 + processes.rank + 1)  # dropout differs per process
        progress = _Progress(device=trainer.device)
        if checkpoint is not None:
            self._restore(checkpoint, trainer, stream, progress)
            if processes.is_main:
                self.metrics.truncate_after(progress.step)
        max_steps = self._max_steps(stats)
        self.say(
            f"Training {_describe(model, vocab, trainer)} for {max_steps} steps of "
            f"{config.training.tokens_per_step} tokens on {processes.world_size} process(es), {trainer.device}"
        )
        dev = None if dev_all is None else dev_all[processes.rank :: processes.world_size]
        return self._train(trainer, stream, progress, vocab, stats, dev, max_steps)

    # -- setup ---------------------------------------------------------------------------

    def _prepare_output_dir(self) -> Optional[Dict[str, Any]]:
        if self.resume:
            checkpoint = load_checkpoint(self.checkpoint_path)
            saved = checkpoint.get("sections")
            if saved != self.config.model_sections():
                changed = sorted(
                    name for name, value in self.config.model_sections().items()
                    if (saved or {}).get(name) != value
                )
                raise ConfigError(
                    f"--resume: the config's [{'], ['.join(changed)}] differ from the run in "
                    f"{self.output_dir}; resume with the same model, vocab and softmax settings"
                )
            if len(checkpoint["processes"]) != self.processes.world_size:
                raise CheckpointError(
                    f"{self.checkpoint_path} was written by {len(checkpoint['processes'])} process(es); "
                    f"resume it with the same number (got {self.processes.world_size})"
                )
            return checkpoint
        if self.checkpoint_path.exists():
            raise TrainingError(
                f"{self.output_dir} already holds a training run; pass --resume to continue it "
                f"or choose another output directory"
            )
        if self.processes.is_main:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        return None

    def _vocabulary(
        self, checkpoint: Optional[Dict[str, Any]], dev: Optional[List[Sentence]]
    ) -> Tuple[Vocabulary, Optional[Dict[str, Any]]]:
        """The run's vocabulary and corpus statistics (one counting pass, shared by the processes)."""
        stats_path = self.output_dir / STATS_NAME
        if checkpoint is not None:
            vocab = Vocabulary.from_disk(self.output_dir / VOCAB_NAME)
            if vocab.fingerprint() != checkpoint["vocab"]:
                raise CheckpointError(f"{self.output_dir / VOCAB_NAME} is not the vocabulary of {self.checkpoint_path}")
            stats = json.loads(stats_path.read_text(encoding="utf8")) if stats_path.exists() else None
            return vocab, stats
        config = self.config
        given: Optional[Vocabulary] = None
        if config.vocab.path is not None:
            given = Vocabulary.from_disk(config.vocab.path)
        elif self.init_dir is not None and (self.init_dir / SOFTMAX_NAME).exists():
            given = Vocabulary.from_disk(self.init_dir / VOCAB_NAME)
        if given is not None and config.training.max_steps is not None:
            return given, None
        self.say(f"Counting words in {len(self.train_files)} training file(s)")
        reader = CorpusReader(
            self.train_files, self.splitter, fmt=config.corpus.format, text_field=config.corpus.text_field,
            shuffle_files=False, rank=self.processes.rank, world_size=self.processes.world_size,
            name="corpus.train",
        )
        counted = count_corpus(reader.sentences())
        if self.processes.distributed:
            gathered: List[Any] = [None] * self.processes.world_size if self.processes.is_main else []
            dist.gather_object(counted, gathered if self.processes.is_main else None, dst=0)
            result: List[Any] = [None]
            if self.processes.is_main:
                counts: Counter = Counter()
                for part_counts, _, _ in gathered:
                    counts.update(part_counts)
                counted = (counts, sum(g[1] for g in gathered), sum(g[2] for g in gathered))
                try:
                    result = [self._vocab_and_stats(counted, given, dev)]
                except TrainingError as err:  # every process stops with the same message
                    result = [err]
            dist.broadcast_object_list(result, src=0)
            if isinstance(result[0], TrainingError):
                raise result[0]
            words, stats = result[0]
            vocab = Vocabulary(words)
        else:
            words, stats = self._vocab_and_stats(counted, given, dev)
            vocab = Vocabulary(words)
        if self.processes.is_main:
            with atomic_output_path(stats_path) as tmp:
                tmp.write_text(json.dumps(stats, indent=2) + "\n", encoding="utf8")
            self.say(
                f"Corpus: {stats['n_sentences']:,} sentences, {stats['n_words']:,} words; vocabulary "
                f"{len(vocab):,} words, {100 * stats['oov_rate']:.2f}% of running words unknown"
            )
            if "dev_unigram_perplexity" in stats:
                self.say(f"Held-out perplexity of a unigram model: {stats['dev_unigram_perplexity']:.1f}")
        return vocab, stats

    def _vocab_and_stats(
        self, counted: Tuple[Counter, int, int], given: Optional[Vocabulary], dev: Optional[List[Sentence]]
    ):
        counts, n_sentences, n_words = counted
        if n_sentences == 0:
            raise TrainingError(f"corpus.train: no sentences in {', '.join(map(str, self.train_files[:3]))} (empty corpus)")
        vocab = given or Vocabulary.from_counts(
            counts, max_size=self.config.vocab.size, min_count=self.config.vocab.min_count
        )
        stats = corpus_stats(counts, n_sentences, n_words, vocab)
        if dev:
            stats["dev_unigram_perplexity"] = unigram_perplexity(counts, n_sentences, vocab, dev)
        return vocab.words, stats

    def _model(self, vocab: Vocabulary, checkpoint: Optional[Dict[str, Any]]) -> BiLMLanguageModel:
        dropout = self.config.training.dropout
        if checkpoint is not None:
            options = BiLMOptions.from_dict(checkpoint["options"], source=str(self.checkpoint_path))
            model = build_model(options, len(vocab), dropout=dropout)
            try:
                model.load_state_dict(checkpoint["model"])
            except RuntimeError as err:
                raise CheckpointError(f"{self.checkpoint_path}: weights do not fit the model ({err})") from None
            return model
        if self.init_from is None:
            return build_model(self.config.bilm_options(), len(vocab), dropout=dropout)
        bilm = load_bilm(self.init_from)
        softmax_path = self.init_dir / SOFTMAX_NAME
        init_vocab = self.init_dir / VOCAB_NAME
        if softmax_path.exists() and init_vocab.exists() and (
            Vocabulary.from_disk(init_vocab).fingerprint() == vocab.fingerprint()
        ):
            softmax = load_softmax(softmax_path, vocab_size=len(vocab), dim=bilm.options.projection_dim)
            self.say(f"Continuing {self.init_from} (biLM and softmax); [model] sizes come from its options.json")
        else:
            softmax = LMSoftmax(len(vocab), bilm.options.projection_dim)
            self.say(f"Continuing the biLM of {self.init_from} with a new softmax; [model] sizes come from its options.json")
        return _language_model(bilm, softmax, dropout)

    def _max_steps(self, stats: Optional[Dict[str, Any]]) -> int:
        training = self.config.training
        if training.max_steps is not None:
            return training.max_steps
        if stats is None:
            raise ConfigError("training.max_steps must be set when the corpus was not counted")
        return max(1, math.ceil(training.max_epochs * stats["n_tokens"] / training.tokens_per_step))

    def _dev_sentences(self) -> Optional[List[Sentence]]:
        if not self.dev_files:
            return None
        config = self.config.corpus
        reader = CorpusReader(
            self.dev_files, self.splitter, fmt=config.format, text_field=config.text_field,
            shuffle_files=False, name="corpus.dev",
        )
        sentences = list(islice(reader.sentences(), config.max_dev_sentences))
        if not sentences:
            raise TrainingError(f"corpus.dev: no sentences in {', '.join(map(str, self.dev_files[:3]))} (empty corpus)")
        return sentences

    # -- checkpoints ------------------------------------------------------------------------

    def _save(self, trainer: Trainer, stream: BatchStream, progress: "_Progress", vocab: Vocabulary) -> None:
        local = {
            "stream": stream.state_dict(),
            "sampler": trainer.sampler.state_dict() if trainer.sampler is not None else None,
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(trainer.device) if trainer.device.type == "cuda" else None,
            "progress": progress.local_state(),
        }
        states = [local]
        if self.processes.distributed:
            states = [None] * self.processes.world_size if self.processes.is_main else []
            dist.gather_object(local, states if self.processes.is_main else None, dst=0)
        if self.processes.is_main:
            save_checkpoint(
                {
                    "step": progress.step,
                    "model": trainer.model.state_dict(),
                    "optimizer": trainer.optimizer.state_dict(),
                    "options": trainer.model.bilm.options.to_dict(),
                    "processes": states,
                    "shared": progress.shared_state(),
                    "config": self.config.to_str(),
                    "sections": self.config.model_sections(),
                    "vocab": vocab.fingerprint(),
                },
                self.checkpoint_path,
            )
            export_model(trainer.model, vocab, self.output_dir)
        if self.processes.distributed:
            dist.barrier()

    def _restore(self, checkpoint: Dict[str, Any], trainer: Trainer, stream: BatchStream, progress: "_Progress") -> None:
        try:
            trainer.optimizer.load_state_dict(checkpoint["optimizer"])
            local = checkpoint["processes"][self.processes.rank]
            stream.load_state_dict(local["stream"])
            if trainer.sampler is not None:
                trainer.sampler.load_state_dict(local["sampler"])
            torch.set_rng_state(local["torch_rng"])
            if trainer.device.type == "cuda" and local["cuda_rng"] is not None:
                torch.cuda.set_rng_state(local["cuda_rng"], trainer.device)
            progress.load(checkpoint["step"], checkpoint["shared"], local["progress"])
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise CheckpointError(f"{self.checkpoint_path}: cannot restore the training state ({err!r})") from None
        self.say(f"Resuming from step {checkpoint['step']}")

    # -- the loop --------------------------------------------------------------------------

    def _train(
        self, trainer: Trainer, stream: BatchStream, progress: "_Progress", vocab: Vocabulary,
        stats: Optional[Dict[str, Any]], dev: Optional[List[Sentence]], max_steps: int,
    ) -> Dict[str, Any]:
        """Run steps up to `max_steps`; `dev` is None without held-out data (the same on every process)."""
        from tqdm import tqdm

        training = self.config.training
        main = self.processes.is_main
        n_train_tokens = stats["n_tokens"] if stats else None
        last_dev: Optional[Dict[str, float]] = None
        if dev is not None and progress.step == 0 and training.eval_at_start:
            last_dev = self._evaluate(trainer, dev, progress, n_train_tokens)
        progress.restart_clock()
        bar = tqdm(total=max_steps, initial=progress.step, disable=not main, unit="step", dynamic_ncols=True)
        last_checkpoint = progress.step
        try:
            while progress.step < max_steps:
                result = trainer.train_step(stream.next_batch())
                progress.add(result)
                if not result.finite:
                    self._non_finite(progress)
                bar.update(1)
                step = progress.step
                if step % training.log_every == 0 or step == max_steps:
                    record = progress.log_record(self.processes, n_train_tokens, trainer.optimizer)
                    if main:
                        self.metrics.append(record)
                        bar.set_postfix(
                            loss=f"{record['train_loss']:.3f}", ppl=f"{record['train_perplexity']:.1f}",
                            tok_s=f"{record['tokens_per_second']:.0f}",
                        )
                paused = time.perf_counter()
                if dev is not None and (step % training.eval_every == 0 or step == max_steps):
                    last_dev = self._evaluate(trainer, dev, progress, n_train_tokens)
                    if main:
                        bar.write(
                            f"step {step}: held-out perplexity {last_dev['dev_perplexity']:.2f} (forward "
                            f"{last_dev['dev_perplexity_forward']:.2f}, backward {last_dev['dev_perplexity_backward']:.2f})"
                        )
                if step % training.checkpoint_every == 0 or step == max_steps:
                    self._save(trainer, stream, progress, vocab)
                    last_checkpoint = step
                    if main:
                        plot_perplexity(
                            self.metrics.read(), self.output_dir / PLOT_NAME, sampled=trainer.sampler is not None,
                            unigram=(stats or {}).get("dev_unigram_perplexity"),
                        )
                progress.exclude(time.perf_counter() - paused)
        except KeyboardInterrupt:
            if main:
                msg.warn(f"Interrupted at step {progress.step}; --resume continues from step {last_checkpoint}")
            raise
        finally:
            bar.close()
        summary = {"step": progress.step, "output_dir": str(self.output_dir)}
        if last_dev is not None:
            summary.update(last_dev)
        if main:
            msg.good(f"Saved the biLM to {self.output_dir} (step {progress.step})")
        return summary

    def _evaluate(self, trainer: Trainer, dev: List[Sentence], progress: "_Progress", n_train_tokens) -> Dict[str, float]:
        result = trainer.evaluate(dev)
        if self.processes.is_main:
            record = {"kind": "dev", "step": progress.step, "epoch": progress.epoch(n_train_tokens), **result}
            self.metrics.append(record)
        return result

    def _non_finite(self, progress: "_Progress") -> None:
        limit = self.config.training.max_nonfinite_steps
        if self.processes.is_main:
            logger.warning(
                "step %d: non-finite loss or gradient, step skipped (%d in a row)", progress.step, progress.nonfinite_run
            )
        if progress.nonfinite_run >= limit:
            raise TrainingError(
                f"The loss or gradient was not finite for {limit} steps in a row (last at step {progress.step}); "
                f"lower optimizer.learn_rate or training.grad_clip, or check the corpus. "
                f"--resume continues from the last checkpoint"
            )


class _Progress:
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

    def log_record(self, processes: Processes, n_train_tokens: Optional[int], optimizer) -> Dict[str, Any]:
        totals = torch.cat([self.nll, self.nll.new_tensor([self.tokens])])
        if processes.distributed:
            dist.all_reduce(totals)
        nll_forward, nll_backward, tokens = totals.tolist()
        seconds = time.perf_counter() - self.started
        self.elapsed += seconds
        self.tokens_seen += int(tokens)
        tokens = max(tokens, 1.0)
        forward = math.exp(min(nll_forward / tokens, 700.0))
        backward = math.exp(min(nll_backward / tokens, 700.0))
        record = {
            "kind": "train",
            "step": self.step,
            "epoch": self.epoch(n_train_tokens),
            "tokens": self.tokens_seen,
            "train_loss": (nll_forward + nll_backward) / (2 * tokens),
            "train_perplexity_forward": forward,
            "train_perplexity_backward": backward,
            "train_perplexity": (forward + backward) / 2,
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


def _describe(model: BiLMLanguageModel, vocab: Vocabulary, trainer: Trainer) -> str:
    options = model.bilm.options
    n_bilm = sum(p.numel() for p in model.bilm.parameters())
    softmax = f"sampled softmax ({trainer.sampler.n_samples} negatives)" if trainer.sampler else "full softmax"
    return (
        f"a biLM of {n_bilm / 1e6:.1f}M parameters (LSTM {options.n_layers}x{options.lstm_dim}, "
        f"projection {options.projection_dim}) with a {len(vocab):,}-word {softmax}"
    )


def pretrain(
    config: PretrainConfig, output_dir: PathLike, *, gpu_id: Optional[int] = None,
    resume: bool = False, init_from: Optional[PathLike] = None,
) -> Dict[str, Any]:
    """Train (or continue) a biLM; returns the final step and held-out perplexities."""
    processes = setup_processes(gpu_id)
    try:
        return PretrainRun(config, output_dir, processes, resume=resume, init_from=init_from).run()
    finally:
        if processes.distributed and dist.is_initialized():
            dist.destroy_process_group()
