"""Held-out perplexity: of the model during training, and of a finished run on any text.

The config's corpus settings read the text the same way training did; the unigram baseline reads the run's tokenized
files rather than tokenizing its training text again.
"""
import math
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple, Union

import torch

from ..errors import InputError, WeightsError
from ..models.loaders import find_model
from ..named_models import NAMED_MODELS, is_downloaded, language_model_folder
from .assembly import assemble_model
from .batch_stream import batches_by_tokens
from .config import PretrainConfig, parse_config
from .corpus import Sentence, resolve_corpus_files
from .default_config import default_config_text
from .language_model import BiLMLanguageModel, LMBatch, n_predictions
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
            nll = model(LMBatch.of_sentences(batch, model.bilm.token_ids, vocab))  # the model copies it to the device
        totals[:2] += nll.double()
        totals[2] += n_predictions(batch)
    nll_forward, nll_backward, n_tokens = processes.sum(totals).tolist()
    scores = language_model_scores("dev_", nll_forward, nll_backward, n_tokens)
    return {**scores, "dev_tokens": int(max(n_tokens, 1.0))}


def run_perplexity(
    run_dir: PathLike, texts: Sequence[PathLike], *, max_sentences: Optional[int] = None,
    unigram: bool = False, device: Optional[torch.device] = None,
) -> Dict[str, float]:
    """Forward, backward and average perplexity (full softmax) of the run's model (or a
    model name's, :func:`scored_model`) on `texts`; with `unigram`, also the unigram
    baseline of its training text."""
    directory, config, bilm = scored_model(run_dir, unigram=unigram)
    text = TextReading(config.corpus, directory.tokenized)
    files = [file for name in texts for file in resolve_corpus_files(str(name), setting="text")]
    sentences = text.first_sentences(files, max_sentences, name="text")
    vocab = directory.read_vocab()
    processes = Processes(0, 1, device or torch.device("cpu"))
    model = assemble_model(len(vocab), pretrained=(bilm, None), softmax=directory.softmax)
    with torch.inference_mode():
        result = held_out_perplexity(
            model.to(processes.device), vocab, sentences, processes=processes,
            tokens_per_batch=config.training.eval_tokens_per_batch, precision=config.training.precision,
        )
    if not math.isfinite(result["dev_perplexity"]):  # finite weights whose products overflow float32
        raise WeightsError(
            f"{run_dir}: the perplexity is not finite (NaN or inf): the biLM's or the softmax's weights overflow float32"
        )
    result["sentences"] = len(sentences)
    if unigram:
        counts, n_sentences, _ = text.count(resolve_corpus_files(config.corpus.train, setting="corpus.train"))
        result["unigram_perplexity"] = unigram_perplexity(counts, n_sentences, vocab, sentences)
    return result


def scored_model(model: PathLike, *, unigram: bool = False) -> Tuple[RunDirectory, PretrainConfig, Path]:
    """The directory (softmax, vocabulary), config and biLM folder of a pretraining run, or
    of a model name that comes with its softmax and vocabulary (spacy-elmo's own): its text
    then read as it was trained, with the spaCy tokenizer of its language and sentence splitting."""
    name = str(model)
    if Path(model).exists() or name not in NAMED_MODELS:
        directory = RunDirectory(model)
        directory.check_finished()
        return directory, directory.read_config(), directory.path
    with_softmax = ", ".join(named for named, found in NAMED_MODELS.items() if found.shipped)
    if is_downloaded(name):
        raise InputError(
            f"{name} is published without the softmax and vocabulary that perplexity reads; give a "
            f"pretraining run's directory, or a model that ships them: {with_softmax}"
        )
    if unigram:
        raise InputError(f"--unigram counts a run's training text, and {name} comes without its own; leave it out")
    language_model = language_model_folder(name)
    bilm = find_model(name)[0].parent
    directory = RunDirectory(language_model or bilm)
    directory.check_finished(config=False)
    # A run that trained on nothing: only its [corpus] reading settings are used.
    reading = {"corpus.train": "", "corpus.split_sentences": True}
    return directory, parse_config(default_config_text(lang=NAMED_MODELS[name].lang), reading, source=name), bilm
