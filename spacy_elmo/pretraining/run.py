"""One `pretrain` invocation, on every process: the output directory (a new run, or
the one there continued), the vocabulary, the model, then the training loop."""
import contextlib
import math
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from confection import Config

from ..directory_lock import hold_directory
from ..errors import ConfigError, SpacyElmoError, TrainingError
from ..messages import note, warn
from ..models.loaders import find_model
from ..models.pytorch.formats import format_of
from ..models.pytorch.original_format import checked_options
from ..named_models import language_model_folder
from ..output_files import check_output_dir
from .assembly import assemble_model, check_same_sizes
from .checkpoint import check_vocabulary, load_checkpoint, restore_training_state
from .config import PretrainConfig, parse_config
from .batch_stream import BatchStream
from .batch_worker import PreparedBatches
from .corpus import Sentence, corpus_root, resolve_corpus_files
from .default_config import default_config_text
from .language_model import BiLMLanguageModel
from .loop import TrainingLoop
from .processes import Processes, setup_processes, shutdown
from .progress import Progress
from .resume import AUTO, Resume, another_run, check_resume, check_resumable, check_steps_left, run_origin
from .run_directory import RunDirectory
from .run_text import TextReading
from .statistics import corpus_stats, unigram_perplexity
from .trainer import Trainer
from .vocab import Vocabulary

PathLike = Union[str, Path]
#: What ``--init-from`` trains with when the config keeps the default optimizer (Adagrad at
#: 0.2 trains a biLM from scratch, and makes a trained one worse): the project's adapt step's.
CONTINUING_OPTIMIZER = {"optimizer.name": "adam", "optimizer.learn_rate": 0.001}


class PretrainRun:
    """Everything one `pretrain` invocation does, on every process.

    :param resume: True: continue the run in `output_dir`; :data:`AUTO`: continue it
        when it is this run, else move it aside (never delete it) and start afresh.
    :param init_from: a biLM to continue training: a path, or a model name.
    """

    def __init__(
        self, config: PretrainConfig, output_dir: PathLike, processes: Processes, *,
        resume: Resume = False, init_from: Optional[PathLike] = None,
    ) -> None:
        self.config = config
        self.directory = RunDirectory(output_dir)
        self.processes = processes
        self.resume = check_resume(resume)
        self.resuming = resume is True  # decided on the main process for AUTO
        # A name's softmax and vocabulary (first: one error names all its files that are missing).
        self.init_language_model = language_model_folder(init_from) if init_from is not None else None
        self.init_from = find_model(init_from) if init_from is not None else None
        init_format = format_of(self.init_from[0]) if self.init_from is not None else None
        if init_format is not None and not init_format.TRAINABLE:
            raise ConfigError(
                f"--init-from {init_from}: an {init_format.NAME} model cannot be trained here; "
                "pretraining reads UTF-8 bytes, as bilm-tf models do"
            )
        if self.init_from is not None and _default_optimizer(config):
            self.config = config = parse_config(config.to_str(), CONTINUING_OPTIMIZER, source="config")
            self.say(
                f"--init-from {init_from}: training with Adam at learn_rate 0.001, which continues a trained biLM "
                "(the default optimizer, Adagrad at 0.2, trains one from scratch and makes it worse); set "
                "optimizer.name or optimizer.learn_rate to choose another"
            )
        self.text = TextReading(config.corpus, self.directory.tokenized)
        corpus = config.corpus
        self.train_files = resolve_corpus_files(corpus.train, setting="corpus.train")
        self.dev_files = resolve_corpus_files(corpus.dev, setting="corpus.dev") if corpus.dev else []
        self.origin = run_origin(None if init_from is None else str(init_from), self.train_files, self.dev_files)
        self.loop: Optional[TrainingLoop] = None
        self._checkpoint: Optional[Dict[str, Any]] = None

    def say(self, text: str) -> None:
        if self.processes.is_main:
            note(text)

    def run(self) -> Dict[str, Any]:
        check_output_dir(self.directory.path, inputs=self._corpus_roots())
        self._check_apart_from_init_from()
        if not self.processes.is_main:
            return self._run()
        # The main process writes the directory; it holds it so no second run writes there too.
        with contextlib.ExitStack() as held:
            held.enter_context(hold_directory(self.directory.path))
            if self.resume == AUTO:
                self.resuming = self._continue_or_move_aside(held)
            before = self.directory.entries()
            try:
                return self._run()
            except BaseException:  # an error, Ctrl-C or SIGTERM
                if self.loop is None or not self.loop.stepped:
                    self.directory.remove_entries_since(before)  # a run that never trained leaves nothing new
                raise

    def _corpus_roots(self) -> Dict[str, Path]:
        """Where the corpus settings read (:func:`corpus_root`): the output directory must stay apart."""
        corpus = self.config.corpus
        roots = {"corpus.train": corpus_root(corpus.train)}
        if corpus.dev:
            roots["corpus.dev"] = corpus_root(corpus.dev)
        return roots

    def _check_apart_from_init_from(self) -> None:
        """The run writes options.json, weights.hdf5 and the language model's files: never over the model it starts from."""
        if self.init_from is None:
            return
        folders = [path if path.is_dir() else path.parent for path in self.init_from if path is not None]
        if self.init_language_model is not None:
            folders.append(Path(self.init_language_model))
        output = self.directory.path.resolve()
        for folder in folders:
            if folder.resolve() == output:
                raise ConfigError(
                    f"Output directory {self.directory.path} holds the --init-from model ({folder}): its files would "
                    "be overwritten; choose another output directory"
                )

    def _continue_or_move_aside(self, held: contextlib.ExitStack) -> bool:
        """For :data:`AUTO`, on the main process holding the directory: True when the run
        there is this one; another run is moved aside, and the new directory held."""
        if not self.directory.checkpoint.exists():
            return False
        try:
            checkpoint = self._load_checkpoint()
            reason = another_run(checkpoint, config=self.config, origin=self.origin)
            if reason is None:
                self._check_resumable(checkpoint)
        except SpacyElmoError as err:
            reason = str(err)
        if reason is None:
            return True
        previous = self.directory.move_aside()
        warn(f"--resume auto: {self.directory.path} held another run ({reason}); moved it to {previous}, starting afresh")
        held.enter_context(hold_directory(self.directory.path))
        return False

    def _check_resumable(self, checkpoint: Dict[str, Any]) -> None:
        check_resumable(
            checkpoint, self.directory, config=self.config, origin=self.origin, world_size=self.processes.world_size
        )

    def _load_checkpoint(self) -> Dict[str, Any]:
        if self._checkpoint is None:
            self._checkpoint = load_checkpoint(self.directory.checkpoint)
        return self._checkpoint

    def _run(self) -> Dict[str, Any]:
        config, processes = self.config, self.processes
        if self.resume == AUTO:
            self.resuming = processes.decide_on_main(None, lambda _: self.resuming)
        checkpoint = self._prepare_output_dir()
        dev_all = self._dev_sentences()
        vocab, stats = self._vocabulary(checkpoint, dev_all)
        if processes.is_main:
            vocab.to_disk(self.directory.vocab)
            self.directory.write_config(config)
        torch.manual_seed(config.seed)
        model = self._model(vocab, checkpoint)
        training = config.training
        trainer = Trainer.from_config(model, vocab, processes, config)
        reader = self.text.reader(
            self.train_files, name="corpus.train", cached=True, seed=config.seed, rank=processes.rank,
            world_size=processes.world_size,
        )
        stream = BatchStream(
            reader, tokens_per_batch=max(1, training.tokens_per_step // processes.world_size),
            shuffle_buffer=config.corpus.shuffle_buffer, sort_window=training.sort_window,
            seed=[config.seed, processes.rank, 2],
        )
        batches = PreparedBatches(stream, model.bilm.token_ids, vocab)
        torch.manual_seed(config.seed * 7919 + processes.rank + 1)  # dropout differs per process
        progress = Progress(device=trainer.device)
        if checkpoint is not None:
            restore_training_state(
                checkpoint, self.directory.checkpoint, trainer=trainer, batches=batches, progress=progress
            )
            self.say(f"Resuming from step {checkpoint['step']}")
            if processes.is_main:
                self.directory.metrics.truncate_after(progress.step)
                if self.directory.exported_step() != progress.step:  # a run stopped while exporting
                    self.directory.export(model, vocab, progress.step)
                    self.say(
                        f"Exported the biLM of step {progress.step} again (the export in {self.directory.path} "
                        f"was not all of it)"
                    )
        max_steps = self._max_steps(stats)
        check_steps_left(progress.step, max_steps, self.directory)
        self.say(
            f"Training {_describe(model, vocab, trainer)} for {max_steps} steps of "
            f"{training.tokens_per_step} tokens on {processes.world_size} process(es), {trainer.device}"
        )
        dev = None if dev_all is None else dev_all[processes.rank :: processes.world_size]
        self.loop = TrainingLoop(
            config, self.directory, trainer=trainer, batches=batches, progress=progress, vocab=vocab,
            max_steps=max_steps, dev=dev, stats=stats, origin=self.origin,
        )
        try:
            return self.loop.run()
        finally:
            # A batch in preparation may write tokenized files: it ends before a stopped run removes them.
            batches.close()

    def _prepare_output_dir(self) -> Optional[Dict[str, Any]]:
        """The checkpoint to continue from, checked against this run (None: a new run)."""
        if self.processes.is_main:
            self.directory.remove_stale_temp_files()
        if self.resuming:
            checkpoint = self._load_checkpoint()
            self._check_resumable(checkpoint)
            return checkpoint
        if self.directory.checkpoint.exists():
            raise TrainingError(
                f"{self.directory.path} already holds a training run; pass --resume to continue it "
                f"or choose another output directory"
            )
        if self.processes.is_main:
            self.directory.path.mkdir(parents=True, exist_ok=True)
            # A fresh run (no checkpoint here): the metrics of a run stopped before its
            # first checkpoint are not this run's.
            self.directory.metrics.truncate_after(-1)
        return None

    def _init_directory(self) -> Optional[RunDirectory]:
        """The run directory of --init-from's biLM: its softmax.hdf5 and vocab.txt sit beside its weights
        (a model name's: in their own package)."""
        if self.init_from is None:
            return None
        weights = self.init_from[0]
        return RunDirectory(self.init_language_model or (weights if weights.is_dir() else weights.parent))

    def _vocabulary(
        self, checkpoint: Optional[Dict[str, Any]], dev: Optional[List[Sentence]]
    ) -> Tuple[Vocabulary, Optional[Dict[str, Any]]]:
        """The run's vocabulary and corpus statistics (one counting pass, shared by the processes)."""
        if checkpoint is not None:
            vocab = self.directory.read_vocab()
            check_vocabulary(checkpoint, self.directory, vocab)
            return vocab, self.directory.read_stats()
        config, init = self.config, self._init_directory()
        given: Optional[Vocabulary] = None
        if config.vocab.path is not None:
            given = Vocabulary.from_disk(config.vocab.path)
        elif init is not None and init.softmax.exists():
            given = init.read_vocab()
        if given is not None and config.training.max_steps is not None:
            return given, None
        self.say(f"Counting words in {len(self.train_files)} training file(s)")
        counted = self.text.count(self.train_files, rank=self.processes.rank, world_size=self.processes.world_size)
        words, stats = self.processes.decide_on_main(
            counted, lambda parts: self._vocab_and_stats(_combine_counts(parts), given, dev)
        )
        vocab = Vocabulary(words)
        if self.processes.is_main:
            self.directory.write_stats(stats)
            self.say(
                f"Corpus: {stats['n_sentences']:,} sentences, {stats['n_words']:,} words; vocabulary "
                f"{len(vocab):,} words, {100 * stats['oov_rate']:.2f}% of running words unknown"
            )
            if "dev_unigram_perplexity" in stats:
                self.say(f"Held-out perplexity of a unigram model: {stats['dev_unigram_perplexity']:.1f}")
        return vocab, stats

    def _vocab_and_stats(
        self, counted: Tuple[Counter, int, int], given: Optional[Vocabulary], dev: Optional[List[Sentence]]
    ) -> Tuple[List[str], Dict[str, Any]]:
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
            options = checked_options(checkpoint["options"], str(self.directory.checkpoint))
            return assemble_model(len(vocab), dropout=dropout, options=options, state=checkpoint["model"])
        init = self._init_directory()
        if init is None:
            return assemble_model(len(vocab), dropout=dropout, options=self.config.bilm_options())
        weights, softmax = self.init_from[0], None
        init.check_export()
        if init.softmax.exists() and init.vocab.exists() and init.read_vocab().fingerprint() == vocab.fingerprint():
            softmax = init.softmax
            self.say(f"Continuing {weights} (biLM and softmax); [model] sizes come from its options.json")
        else:
            self.say(f"Continuing the biLM of {weights} with a new softmax; [model] sizes come from its options.json")
        model = self.config.model
        check_same_sizes(self.init_from, lstm_dim=model.lstm_dim, projection_dim=model.projection_dim)
        return assemble_model(len(vocab), dropout=dropout, pretrained=self.init_from, softmax=softmax)

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
        return self.text.first_sentences(self.dev_files, self.config.corpus.max_dev_sentences, name="corpus.dev")


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
    resume: Resume = False, init_from: Optional[PathLike] = None,
) -> Dict[str, Any]:
    """Train (or continue) a biLM on `device` (see `setup_processes`); returns the final step and held-out perplexities.

    :param resume: True: continue the run in `output_dir`; ``"auto"``: continue it when it
        is this run (same settings, `init_from` and corpus files), else move it to
        ``OUTPUT_DIR.previous`` and start afresh.
    """
    processes = setup_processes(device)
    try:
        return PretrainRun(config, output_dir, processes, resume=resume, init_from=init_from).run()
    finally:
        shutdown(processes)


def _default_optimizer(config: PretrainConfig) -> bool:
    """Whether `config` trains with the default config's optimizer and learning rate."""
    default = Config().from_str(default_config_text(), interpolate=False)["optimizer"]
    return (config.optimizer.name, config.optimizer.learn_rate) == (default["name"], default["learn_rate"])


def _combine_counts(parts: List[Tuple[Counter, int, int]]) -> Tuple[Counter, int, int]:
    """The vocabulary pass's counts of every process, added up."""
    counts: Counter = Counter()
    for part_counts, _, _ in parts:
        counts.update(part_counts)  # in place: a sum of Counters would copy the whole vocabulary per process
    return counts, sum(part[1] for part in parts), sum(part[2] for part in parts)
