"""Tokenize text as a pretraining run does, one sentence per line, tokens separated by spaces.

Usage:
    python tools/pretokenize_text.py INPUT OUTPUT [--max-words N] [--tokenizer en]

The sentences are those `pretrain` makes of INPUT with `corpus.tokenizer = "en"`,
`corpus.split_sentences = true` and `corpus.max_window = 100`; a run over OUTPUT with
`corpus.tokenizer = "whitespace"` and `corpus.split_sentences = false` reads the same
sentences without spaCy, e.g. on a GPU machine where only PyTorch is installed. (Tokens with
whitespace inside, which a whitespace tokenizer would split, are dropped: spaCy makes almost none.)
"""
import argparse
import sys
import time
from pathlib import Path

from spacy_elmo.errors import InputError, SpacyElmoError
from spacy_elmo.output_files import atomic_output_path
from spacy_elmo.pretraining.corpus import TextSplitter, file_format, read_records


def pretokenize(source: Path, output: Path, *, tokenizer: str = "en", max_words: int = 0, max_window: int = 100) -> int:
    """Write `source`'s sentences to `output`; returns the number of words written."""
    if file_format(source, "auto") != "text":
        raise InputError(f"{source}: plain text only (one paragraph or sentence per line), not {source.suffix}")
    splitter = TextSplitter(tokenizer=tokenizer, split_sentences=True, max_window=max_window)
    words, start = 0, time.time()
    with atomic_output_path(output) as tmp, tmp.open("w", encoding="utf8") as out:
        for n_records, (text, _, _) in enumerate(read_records(source, "text"), start=1):
            for sentence in splitter(text):
                tokens = [token for token in sentence if token.split() == [token]]
                if tokens:
                    out.write(" ".join(tokens) + "\n")
                    words += len(tokens)
            if n_records % 50_000 == 0:
                print(f"{n_records:,} lines, {words:,} words, {words / (time.time() - start):,.0f} words/s", flush=True)
            if max_words and words >= max_words:
                break
    return words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("input", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--max-words", type=int, default=0, help="stop after the line that reaches this many words (0: all)")
    parser.add_argument("--tokenizer", default="en", help="spaCy language code")
    args = parser.parse_args()
    try:
        words = pretokenize(args.input, args.output, tokenizer=args.tokenizer, max_words=args.max_words)
    except SpacyElmoError as err:
        sys.exit(f"✘ {err}")
    print(f"{args.output}: {words:,} words")


if __name__ == "__main__":
    main()
