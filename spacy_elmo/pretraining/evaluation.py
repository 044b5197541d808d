"""Held-out perplexity: of the model during training, and of a finished run on any text.

A run's output directory holds everything needed: the biLM (options.json,
weights.hdf5), its softmax and vocabulary, and the config, whose corpus settings
(tokenizer, sentence splitting, window) read the text the same way training did.
The unigram baseline counts the run's training text again; its tokenized files make
that a read of the tokenized file, not a second tokenization.
"""
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

import torch

from ..models.pytorch.char_ids import batch_to_char_ids
from .assembly import assemble_model
from .batch_stream import batches_by_tokens
from .corpus import Sentence, resolve_corpus_files
from .language_model import BiLMLanguageModel, n_predictions, target_ids
from .precision import autocast, autocast_dtype
from .processes import Processes
from .run_directory import RunDirectory
from .run_text import TextReading
from .statistics import language_model_scores, unigram_perplexity
from .vocab import Vocabulary

PathLike = Union[str, Path]


@torch.no_grad()
def held_out_perplexity(
    model: BiLMLanguageModel, vocab: Vocabulary, sentences: Sequence[Sentence], *, processes: Processes,
    tokens_per_batch: int, precision: str = "auto",
) -> Dict[str, float]:
    """Perplexity with the full softmax, per direction and averaged (bilm-tf).

    Every process scores its own `sentences` on its device (where `model` is); the
    sums are combined across processes.
    """
    model.eval()
    device = processes.device
    dtype = autocast_dtype(precision, device)
    totals = torch.zeros(3, dtype=torch.float64, device=device)
    for batch in batches_by_tokens(sorted(sentences, key=len), tokens_per_batch):
        with autocast(dtype, device):
            nll = model(batch_to_char_ids(batch), target_ids(batch, vocab))  # on the host; the model copies them
        totals[:2] += nll.double()
        totals[2] += n_predictions(batch)
    nll_forward, nll_backward, n_tokens = processes.sum(totals).tolist()
    scores = language_model_scores("dev_", nll_forward, nll_backward, n_tokens)
    return {**scores, "dev_tokens": int(max(n_tokens, 1.0))}


def run_perplexity(
    run_dir: PathLike, texts: Sequence[PathLike], *, max_sentences: Optional[int] = None,
    unigram: bool = False, device: Optional[torch.device] = None,
) -> Dict[str, float]:
    """Forward, backward and average perplexity (full softmax) of the run's model on
    `texts`; with `unigram`, also the unigram baseline of its training text."""
    directory = RunDirectory(run_dir)
    directory.check_finished()
    config = directory.read_config()
    text = TextReading(config.corpus, directory.tokenized)
    files = [file for name in texts for file in resolve_corpus_files(str(name), setting="text")]
    sentences = text.first_sentences(files, max_sentences, name="text")
    vocab = directory.read_vocab()
    processes = Processes(0, 1, device or torch.device("cpu"))
    model = assemble_model(len(vocab), pretrained=(directory.path, None), softmax=directory.softmax)
    with torch.inference_mode():
        result = held_out_perplexity(
            model.to(processes.device), vocab, sentences, processes=processes,
            tokens_per_batch=config.training.eval_tokens_per_batch, precision=config.training.precision,
        )
    result["sentences"] = len(sentences)
    if unigram:
        counts, n_sentences, _ = text.count(resolve_corpus_files(config.corpus.train, setting="corpus.train"))
        result["unigram_perplexity"] = unigram_perplexity(counts, n_sentences, vocab, sentences)
    return result
