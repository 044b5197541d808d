"""Held-out perplexity of a finished pretraining run on any text.

A run's output directory holds everything needed: the biLM (options.json,
weights.hdf5), its softmax and vocabulary, and the config, whose corpus settings
(tokenizer, sentence splitting, window) read the text the same way training did.
The unigram baseline counts the run's training text again; its token cache makes
that a read of the tokenized file, not a second tokenization.
"""
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

import torch

from ..errors import InputError
from ..models.pytorch.original_format import load_bilm
from .config import load_config
from .corpus import CorpusReader, resolve_corpus_files
from .processes import Processes
from .run import CONFIG_NAME, VOCAB_NAME, read_sentences, text_reading
from .softmax import SOFTMAX_NAME, load_softmax
from .statistics import count_corpus, unigram_perplexity
from .trainer import Trainer, language_model
from .vocab import Vocabulary

PathLike = Union[str, Path]


def run_perplexity(
    run_dir: PathLike, texts: Sequence[PathLike], *, max_sentences: Optional[int] = None,
    unigram: bool = False, device: Optional[torch.device] = None,
) -> Dict[str, float]:
    """Forward, backward and average perplexity (full softmax) of the run's model on
    `texts`; with `unigram`, also the unigram baseline of its training text."""
    run_dir = Path(run_dir)
    missing = [name for name in (CONFIG_NAME, VOCAB_NAME, SOFTMAX_NAME) if not (run_dir / name).is_file()]
    if missing:
        raise InputError(f"{run_dir} is not a finished pretraining run: no {', '.join(missing)}")
    config = load_config(run_dir / CONFIG_NAME, {})
    splitter, cache = text_reading(config, run_dir)
    files = [file for text in texts for file in resolve_corpus_files(str(text), setting="text")]
    sentences = read_sentences(files, splitter, config, max_sentences, name="text")
    vocab = Vocabulary.from_disk(run_dir / VOCAB_NAME)
    bilm = load_bilm(run_dir)
    softmax = load_softmax(run_dir / SOFTMAX_NAME, vocab_size=len(vocab), dim=bilm.options.projection_dim)
    trainer = Trainer(language_model(bilm, softmax, 0.0), vocab, config, Processes(0, 1, device or torch.device("cpu")))
    with torch.inference_mode():
        result = trainer.evaluate(sentences)
    result["sentences"] = len(sentences)
    if unigram:
        train_files = resolve_corpus_files(config.corpus.train, setting="corpus.train")
        reader = CorpusReader(
            train_files, splitter, fmt=config.corpus.format, text_field=config.corpus.text_field,
            shuffle_files=False, name="corpus.train", cache=cache,
        )
        counts, n_sentences, _ = count_corpus(reader.sentences())
        result["unigram_perplexity"] = unigram_perplexity(counts, n_sentences, vocab, sentences)
    return result
