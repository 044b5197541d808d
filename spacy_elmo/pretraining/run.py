"""One `pretrain` invocation, on every process: output directory, vocabulary,
model, the training loop with evaluation and checkpoints, and the exported biLM.
"""
import contextlib
import json
import logging
import math
import os
import shutil
import time
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from confection import Config
from wasabi import msg

from ..directory_lock import hold_directory
from ..errors import InputError
from ..models.pytorch.options import BiLMOptions
from ..models.pytorch.original_format import OPTIONS_NAME, WEIGHTS_NAME, load_bilm, save_bilm
from ..named_models import locate_model
from ..output_files import atomic_output_path, check_output_dir, remove_stale_temp_files
from ..stopping import raise_if_terminated
from .checkpoint import CHECKPOINT_NAME, load_checkpoint, restore_training_state, save_training_state, saved_sections
from .config import PretrainConfig
from .corpus import BatchStream, CorpusReader, Sentence, TextSplitter, resolve_corpus_files
from .errors import CheckpointError, ConfigError, TrainingError
from .metrics import METRICS_NAME, PLOT_NAME, MetricsLog, plot_perplexity
from .objective import BiLMLanguageModel
from .processes import Processes, setup_processes, shutdown
from .progress import Progress
from .softmax import SOFTMAX_NAME, LMSoftmax, load_softmax, save_softmax
from .token_cache import TokenCache
from .statistics import corpus_stats, count_corpus, unigram_perplexity
from .trainer import Trainer, build_model, language_model
from .vocab import Vocabulary

logger = logging.getLogger(__name__)

VOCAB_NAME = "vocab.txt"
CONFIG_NAME = "config.cfg"
STATS_NAME = "corpus_stats.json"
TOKENIZED_DIR = "tokenized"  # the token cache: the training text, tokenized once
RUN_OUTPUTS = (
    CONFIG_NAME, STATS_NAME, VOCAB_NAME, SOFTMAX_NAME, CHECKPOINT_NAME, METRICS_NAME, PLOT_NAME,
    WEIGHTS_NAME, OPTIONS_NAME,
)
PathLike = Union[str, Path]

# A mean loss this many times log(vocabulary size) (a uniform guess's) means the run diverged.
DIVERGENCE_FACTOR = 10


def text_reading(config: PretrainConfig, output_dir: Path) -> Tuple[TextSplitter, TokenCache]:
    """How a run splits its text into sentences, and its token cache in `output_dir`."""
    corpus = config.corpus
    splitter = TextSplitter(
        tokenizer=corpus.tokenizer, split_sentences=corpus.split_sentences, max_window=corpus.max_window
    )
    settings = json.dumps([splitter.settings, corpus.format, corpus.text_field])
    return splitter, TokenCache(output_dir / TOKENIZED_DIR, settings)


def read_sentences(
    files: List[Path], splitter: TextSplitter, config: PretrainConfig, max_sentences: Optional[int], *, name: str
) -> List[Sentence]:
    """The first `max_sentences` sentences (all: None) of held-out text, read in order."""
    reader = CorpusReader(
        files, splitter, fmt=config.corpus.format, text_field=config.corpus.text_field,
        shuffle_files=False, name=name,
    )
    sentences = list(islice(reader.sentences(), max_sentences))
    if not sentences:
        raise TrainingError(f"{name}: no sentences in {', '.join(map(str, files[:3]))} (empty corpus)")
    return sentences


def export_model(model: BiLMLanguageModel, vocab: Vocabulary, output_dir: PathLike) -> None:
    """Write the original-format biLM (options.json, weights.hdf5), softmax and vocabulary."""
    output_dir = Path(output_dir)
    save_bilm(model.bilm, output_dir)
    save_softmax(model.softmax, output_dir / SOFTMAX_NAME)
    vocab.to_disk(output_dir / VOCAB_NAME)


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
        # A path, or a model name (the shipped English biLM, a published one).
        self.init_from, self.init_options = None, None
        if init_from is not None:
            self.init_from, self.init_options = locate_model(init_from)
        # A run's softmax.hdf5 and vocab.txt sit beside its weights.
        self.init_dir = None
        if self.init_from is not None:
            self.init_dir = self.init_from if self.init_from.is_dir() else self.init_from.parent
        self.checkpoint_path = self.output_dir / CHECKPOINT_NAME
        self.training_started = False
        self.metrics = MetricsLog(self.output_dir / METRICS_NAME)
        corpus = config.corpus
        self.splitter, self.token_cache = text_reading(config, self.output_dir)
        self.train_files = resolve_corpus_files(corpus.train, setting="corpus.train")
        self.dev_files = resolve_corpus_files(corpus.dev, setting="corpus.dev") if corpus.dev else []

    def say(self, text: str) -> None:
        if self.processes.is_main:
            msg.info(text)

    def run(self) -> Dict[str, Any]:
        check_output_dir(self.output_dir)
        if not self.processes.is_main:
            return self._run()
        # The main process writes the directory; it holds it so no second run writes there too.
        with hold_directory(self.output_dir):
            before = set(os.listdir(self.output_dir))
            try:
                return self._run()
            except BaseException:
                if not self.training_started:
                    _remove_new_entries(self.output_dir, before)  # a run that never trained leaves nothing
                raise

    def _run(self) -> Dict[str, Any]:
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
                cache=self.token_cache,
            ),
            tokens_per_batch=tokens_per_batch, shuffle_buffer=config.corpus.shuffle_buffer,
            sort_window=config.training.sort_window, seed=[config.seed, processes.rank, 2],
        )
        torch.manual_seed(config.seed * 7919 + processes.rank + 1)  # dropout differs per process
        progress = Progress(device=trainer.device)
        if checkpoint is not None:
            restore_training_state(checkpoint, self.checkpoint_path, trainer=trainer, stream=stream, progress=progress)
            self.say(f"Resuming from step {checkpoint['step']}")
            if processes.is_main:
                self.metrics.truncate_after(progress.step)
        max_steps = self._max_steps(stats)
        if progress.step > max_steps:
            raise ConfigError(
                f"--resume: the run in {self.output_dir} is at step {progress.step}, past training.max_steps "
                f"({max_steps}); give a larger training.max_steps to train on"
            )
        self.say(
            f"Training {_describe(model, vocab, trainer)} for {max_steps} steps of "
            f"{config.training.tokens_per_step} tokens on {processes.world_size} process(es), {trainer.device}"
        )
        dev = None if dev_all is None else dev_all[processes.rank :: processes.world_size]
        return self._train(trainer, stream, progress, vocab, stats, dev, max_steps)

    # -- setup ---------------------------------------------------------------------------

    def _prepare_output_dir(self) -> Optional[Dict[str, Any]]:
        if self.processes.is_main:
            # Left by a run killed while saving: in the output directory only the run's own
            # outputs' (other files there are the user's); the token cache is all ours.
            remove_stale_temp_files(self.output_dir, RUN_OUTPUTS)
            remove_stale_temp_files(self.output_dir / TOKENIZED_DIR, None)
        if self.resume:
            checkpoint = load_checkpoint(self.checkpoint_path)
            saved, current = saved_sections(checkpoint), self.config.model_sections()
            if saved != current:
                changed = sorted(name for name, value in current.items() if (saved or {}).get(name) != value)
                raise ConfigError(
                    f"--resume: the config's [{'], ['.join(changed)}] differ from the run in "
                    f"{self.output_dir}; resume with the same model, vocab and softmax settings"
                )
            self._check_same_corpus(checkpoint)
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
            # A fresh run (no checkpoint here): the metrics of a run stopped before its
            # first checkpoint are not this run's.
            self.metrics.truncate_after(-1)
        return None

    def _check_same_corpus(self, checkpoint: Dict[str, Any]) -> None:
        """A checkpoint's read position only means something in the corpus it was read from."""
        saved = str(Config().from_str(checkpoint["config"])["corpus"]["train"])
        now = self.config.corpus.train
        if saved == now:
            return
        try:
            same = [p.resolve() for p in resolve_corpus_files(saved, setting="corpus.train")] == [
                p.resolve() for p in self.train_files
            ]
        except InputError:
            same = False
        if not same:
            raise ConfigError(
                f"--resume: corpus.train is {now}, but the run in {self.output_dir} was trained on {saved}; "
                f"resume with the same corpus (its read position is saved), or start a new run elsewhere"
            )

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
            name="corpus.train", cache=self.token_cache,
        )
        counted = count_corpus(reader.sentences())
        words, stats = self.processes.decide_on_main(
            counted, lambda parts: self._vocab_and_stats(_combine_counts(parts), given, dev)
        )
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
        bilm = load_bilm(self.init_from, self.init_options)
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
        return language_model(bilm, softmax, dropout)

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
        return read_sentences(
            self.dev_files, self.splitter, self.config, self.config.corpus.max_dev_sentences, name="corpus.dev"
        )

    # -- checkpoints ------------------------------------------------------------------------

    def _save(self, trainer: Trainer, stream: BatchStream, progress: Progress, vocab: Vocabulary) -> None:
        save_training_state(
            self.checkpoint_path, trainer=trainer, stream=stream, progress=progress, config=self.config, vocab=vocab
        )
        if self.processes.is_main:
            export_model(trainer.model, vocab, self.output_dir)
        self.processes.barrier()

    # -- the loop --------------------------------------------------------------------------

    def _train(
        self, trainer: Trainer, stream: BatchStream, progress: Progress, vocab: Vocabulary,
        stats: Optional[Dict[str, Any]], dev: Optional[List[Sentence]], max_steps: int,
    ) -> Dict[str, Any]:
        """Run steps up to `max_steps`; `dev` is None without held-out data (the same on every process)."""
        from tqdm import tqdm

        self.training_started = True
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
                raise_if_terminated()
                trainer.set_learn_rate(progress.step, max_steps)
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
                    self._check_divergence(record["train_loss"], len(vocab), step, last_checkpoint)
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
                if self.checkpoint_path.exists():
                    msg.warn(f"Interrupted at step {progress.step}; --resume continues from step {last_checkpoint}")
                else:
                    msg.warn(
                        f"Interrupted at step {progress.step}, before the first checkpoint: nothing to resume; "
                        f"run the same command again (without --resume) to start over"
                    )
            raise
        finally:
            bar.close()
        summary = {"step": progress.step, "output_dir": str(self.output_dir)}
        if last_dev is not None:
            summary.update(last_dev)
        if main:
            msg.good(f"Saved the biLM to {self.output_dir} (step {progress.step})")
        return summary

    def _evaluate(self, trainer: Trainer, dev: List[Sentence], progress: Progress, n_train_tokens) -> Dict[str, float]:
        result = trainer.evaluate(dev)
        if self.processes.is_main:
            record = {"kind": "dev", "step": progress.step, "epoch": progress.epoch(n_train_tokens), **result}
            self.metrics.append(record)
        return result

    def _check_divergence(self, loss: float, vocab_size: int, step: int, last_checkpoint: int) -> None:
        """Stop a run whose loss is far above a uniform guess over the vocabulary:
        it has diverged (its perplexity saturates) and more steps cannot repair it."""
        limit = DIVERGENCE_FACTOR * math.log(vocab_size)
        if loss > limit:
            optimizer = self.config.optimizer
            raise TrainingError(
                f"Training diverged at step {step}: the loss per token is {loss:.3g}, over {DIVERGENCE_FACTOR}x "
                f"that of a uniform guess over the vocabulary ({math.log(vocab_size):.2f}); lower "
                f"optimizer.learn_rate (now {optimizer.learn_rate:g}) or training.grad_clip and start again "
                f"({f'the last checkpoint is from step {last_checkpoint}' if last_checkpoint else 'no checkpoint was saved'})"
            )

    def _non_finite(self, progress: Progress) -> None:
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


def _describe(model: BiLMLanguageModel, vocab: Vocabulary, trainer: Trainer) -> str:
    options = model.bilm.options
    n_bilm = sum(p.numel() for p in model.bilm.parameters())
    softmax = f"sampled softmax ({trainer.sampler.n_samples} negatives)" if trainer.sampler else "full softmax"
    return (
        f"a biLM of {n_bilm / 1e6:.1f}M parameters (LSTM {options.n_layers}x{options.lstm_dim}, "
        f"projection {options.projection_dim}) with a {len(vocab):,}-word {softmax}"
    )


def pretrain(
    config: PretrainConfig, output_dir: PathLike, *, device: Optional[torch.device] = None,
    resume: bool = False, init_from: Optional[PathLike] = None,
) -> Dict[str, Any]:
    """Train (or continue) a biLM on `device` (see `setup_processes`); returns the final step and held-out perplexities."""
    processes = setup_processes(device)
    try:
        return PretrainRun(config, output_dir, processes, resume=resume, init_from=init_from).run()
    finally:
        shutdown(processes)


def _remove_new_entries(directory: Path, before: set) -> None:
    """Remove what this run added to `directory` (files and the token cache it began)."""
    for name in set(os.listdir(directory)) - before:
        path = directory / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _combine_counts(parts: List[Tuple[Counter, int, int]]) -> Tuple[Counter, int, int]:
    """The vocabulary pass's counts of every process, added up."""
    counts: Counter = Counter()
    for part_counts, _, _ in parts:
        counts.update(part_counts)
    return counts, sum(part[1] for part in parts), sum(part[2] for part in parts)

