"""The training loop of a run: steps up to the last, logs, held-out evaluation,
checkpoints with the exported model, and the guards that stop a run gone wrong."""
import math
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from wasabi import msg

from ..errors import TrainingError
from ..messages import warn
from ..sigterm import raise_if_terminated
from .checkpoint import save_training_state
from .config import PretrainConfig
from .batch_worker import PreparedBatches
from .corpus import Sentence
from .evaluation import held_out_perplexity
from .metrics import plot_perplexity
from .processes import Processes
from .progress import Progress
from .run_directory import RunDirectory
from .trainer import Trainer
from .vocab import Vocabulary

# A mean loss this many times log(vocabulary size) (a uniform guess's) means the run diverged.
DIVERGENCE_FACTOR = 10


@dataclass
class TrainingLoop:
    """Steps of `trainer` on `stream` from `progress` up to `max_steps`, on every process.

    :param dev: this process's share of the held-out sentences (None: no evaluation).
    :param stats: the corpus statistics (None: the corpus was not counted).
    :param origin: what the run started from, saved with each checkpoint.
    """

    config: PretrainConfig
    directory: RunDirectory
    trainer: Trainer
    batches: PreparedBatches
    progress: Progress
    vocab: Vocabulary
    max_steps: int
    dev: Optional[List[Sentence]]
    stats: Optional[Dict[str, Any]]
    origin: Dict[str, Any]
    #: Whether a step has been trained (a run stopped before then leaves nothing behind).
    stepped: bool = field(default=False, init=False)

    @property
    def processes(self) -> Processes:
        return self.trainer.processes

    @property
    def n_train_tokens(self) -> Optional[int]:
        return self.stats["n_tokens"] if self.stats else None

    def run(self) -> Dict[str, Any]:
        """Train; returns the final step and the last held-out perplexities."""
        from tqdm import tqdm

        training, progress, trainer = self.config.training, self.progress, self.trainer
        main = self.processes.is_main
        last_dev: Optional[Dict[str, float]] = None
        if self.dev is not None and progress.step == 0 and training.eval_at_start:
            last_dev = self._evaluate()
            if main:
                print(_dev_line(0, last_dev), flush=True)  # where the run starts from
        progress.restart_clock()
        bar = tqdm(total=self.max_steps, initial=progress.step, disable=not main, unit="step", dynamic_ncols=True)
        last_checkpoint = progress.step
        try:
            while progress.step < self.max_steps:
                raise_if_terminated()
                trainer.set_learn_rate(progress.step, self.max_steps)
                progress.add(trainer.step(trainer.with_negatives(self.batches.next_step())))
                self.stepped = True
                bar.update(1)
                step = progress.step
                last = step == self.max_steps
                if step % training.log_every == 0 or step % training.checkpoint_every == 0 or last:
                    # The steps' figures are read from the device here only: the steps between never wait for it.
                    self._non_finite(last_checkpoint, progress.settle())
                if step % training.log_every == 0 or last:
                    record = progress.log_record(self.processes, self.n_train_tokens, trainer.optimizer)
                    if main:
                        self.directory.metrics.append(record)
                        bar.set_postfix(
                            loss=f"{record['train_loss']:.3f}", ppl=f"{record['train_perplexity']:.1f}",
                            tok_s=f"{record['tokens_per_second']:.0f}",
                        )
                    self._check_divergence(record["train_loss"], step, last_checkpoint)
                paused = time.perf_counter()
                if self.dev is not None and (step % training.eval_every == 0 or last):
                    last_dev = self._evaluate()
                    if main:
                        bar.write(_dev_line(step, last_dev))
                if step % training.checkpoint_every == 0 or last:
                    self._save(last_checkpoint)
                    last_checkpoint = step
                progress.exclude(time.perf_counter() - paused)
        except KeyboardInterrupt:
            if main:
                self._say_interrupted(last_checkpoint)
            raise
        finally:
            bar.close()
        summary = {"step": progress.step, "output_dir": str(self.directory.path), **(last_dev or {})}
        if main:
            msg.good(f"Saved the biLM to {self.directory.path} (step {progress.step})")
        return summary

    def _evaluate(self) -> Dict[str, float]:
        result = held_out_perplexity(
            self.trainer.model, self.vocab, self.dev, processes=self.processes,
            tokens_per_batch=self.config.training.eval_tokens_per_batch, precision=self.config.training.precision,
        )
        if self.processes.is_main:
            progress = self.progress
            self.directory.metrics.append(
                {"kind": "dev", "step": progress.step, "epoch": progress.epoch(self.n_train_tokens), **result}
            )
        return result

    def _save(self, last_checkpoint: int) -> None:
        """Checkpoint, export the model and plot the metrics (weights that are not finite are not saved)."""
        self._check_weights(last_checkpoint)
        save_training_state(
            self.directory.checkpoint, trainer=self.trainer, batches=self.batches, progress=self.progress,
            config=self.config, vocab=self.vocab, origin=self.origin,
        )
        if self.processes.is_main:
            self.directory.export(self.trainer.model, self.vocab, self.progress.step)
        self.processes.barrier()
        if self.processes.is_main:
            plot_perplexity(
                self.directory.metrics.read(), self.directory.plot, sampled=self.trainer.sampler is not None,
                unigram=(self.stats or {}).get("dev_unigram_perplexity"),
            )

    def _check_divergence(self, loss: float, step: int, last_checkpoint: int) -> None:
        """Stop a run whose loss is far above a uniform guess over the vocabulary:
        it has diverged (its perplexity saturates) and more steps cannot repair it."""
        uniform = math.log(len(self.vocab))
        if loss > DIVERGENCE_FACTOR * uniform:
            raise TrainingError(
                f"Training diverged at step {step}: the loss per token is {loss:.3g}, over {DIVERGENCE_FACTOR}x "
                f"that of a uniform guess over the vocabulary ({uniform:.2f}); lower "
                f"optimizer.learn_rate (now {self.config.optimizer.learn_rate:g}) or training.grad_clip and start again "
                f"({_kept(last_checkpoint)})"
            )

    def _check_weights(self, last_checkpoint: int) -> None:
        """Stop a run whose weights are no longer all finite: no later step can repair them,
        and neither a checkpoint nor the exported biLM may hold them."""
        parameters = list(self.trainer.model.parameters())
        finite = torch.stack([torch.isfinite(p).all() for p in parameters]).all()
        if not self.processes.all_true_on_device(finite):
            raise TrainingError(
                f"The biLM's weights are not finite (NaN or infinity) at step {self.progress.step}, so they were "
                f"not saved; lower optimizer.learn_rate (now {self.config.optimizer.learn_rate:g}) or "
                f"training.grad_clip and start again ({_kept(last_checkpoint)})"
            )

    def _non_finite(self, last_checkpoint: int, skipped: List[Tuple[int, int]]) -> None:
        """Warn of the `skipped` steps (each with the skipped steps in a row up to it) and stop
        the run where too many came in a row."""
        if not skipped:
            return
        self._check_weights(last_checkpoint)  # weights gone non-finite: stop now, not after more skipped steps
        limit = self.config.training.max_nonfinite_steps
        for step, in_a_row in skipped:
            if self.processes.is_main:
                warn(f"step {step}: non-finite loss or gradient, step skipped ({in_a_row} in a row)")
            if in_a_row >= limit:
                raise TrainingError(
                    f"The loss or gradient was not finite for {limit} steps in a row (last at step {step}); "
                    f"lower optimizer.learn_rate or training.grad_clip, or check the corpus. "
                    f"--resume continues from the last checkpoint"
                )

    def _say_interrupted(self, last_checkpoint: int) -> None:
        if self.directory.checkpoint.exists():
            warn(f"Interrupted at step {self.progress.step}; --resume continues from step {last_checkpoint}")
        else:
            warn(
                f"Interrupted at step {self.progress.step}, before the first checkpoint: nothing to resume; "
                f"run the same command again (without --resume) to start over"
            )


def _dev_line(step: int, result: Dict[str, float]) -> str:
    return (
        f"step {step}: held-out perplexity {result['dev_perplexity']:.2f} (forward "
        f"{result['dev_perplexity_forward']:.2f}, backward {result['dev_perplexity_backward']:.2f})"
    )


def _kept(last_checkpoint: int) -> str:
    """What a stopped run keeps: its last checkpoint, if it saved one."""
    return f"the last checkpoint is from step {last_checkpoint}" if last_checkpoint else "no checkpoint was saved"
