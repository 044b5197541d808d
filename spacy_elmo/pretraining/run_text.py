"""How a run reads text: the sentences its ``[corpus]`` settings make of a file, and
the tokenized files that keeps its training text tokenized in the run's directory."""
import json
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from ..errors import TrainingError
from .config import CorpusConfig
from .corpus import CorpusReader, Sentence, TextSplitter
from .statistics import count_corpus
from .tokenized_files import TokenizedFiles


class TextReading:
    """Readers of corpus files with one run's corpus settings.

    :param cache_dir: the run's tokenized files (training text only).
    """

    def __init__(self, corpus: CorpusConfig, cache_dir: Path) -> None:
        self.corpus = corpus
        self.splitter = TextSplitter(
            tokenizer=corpus.tokenizer, split_sentences=corpus.split_sentences, max_window=corpus.max_window
        )
        self.cache = TokenizedFiles(cache_dir, json.dumps([self.splitter.settings, corpus.format, corpus.text_field]))

    def reader(self, files: Sequence[Path], *, name: str, cached: bool = False, **settings: Any) -> CorpusReader:
        """A reader of `files`; `settings` are :class:`CorpusReader`'s own (order, sharding).

        :param name: the setting that named the files, for messages.
        :param cached: read through the tokenized files (the training text).
        """
        return CorpusReader(
            files, self.splitter, fmt=self.corpus.format, text_field=self.corpus.text_field, name=name,
            cache=self.cache if cached else None, **settings,
        )

    def first_sentences(self, files: Sequence[Path], max_sentences: Optional[int], *, name: str) -> List[Sentence]:
        """The first `max_sentences` sentences (all: None) of held-out text, read in order."""
        sentences = list(islice(self.reader(files, name=name, shuffle_files=False).sentences(), max_sentences))
        if not sentences:
            raise TrainingError(f"{name}: no sentences in {', '.join(map(str, files[:3]))} (empty corpus)")
        return sentences

    def count(self, files: Sequence[Path], *, rank: int = 0, world_size: int = 1) -> Tuple[Counter, int, int]:
        """Word counts, sentences and words of this process's share of the training text."""
        reader = self.reader(files, name="corpus.train", cached=True, shuffle_files=False, rank=rank, world_size=world_size)
        return count_corpus(reader.sentences())
