"""Train floret vectors on raw text, tokenized as spaCy tokenizes it.

Usage:
    python scripts/train_vectors.py RAW_TEXT OUTPUT.floret [--lang en] [--dim 300]
        [--bucket 50000] [--epochs 5] [--minn 4] [--maxn 5] [--min-count 5] [--threads 1]

Then, as spaCy documents it:
    python -m spacy init vectors en OUTPUT.floret VECTORS_DIR --mode floret

RAW_TEXT: UTF-8, one paragraph per line (what `pretrain` reads). Each line is tokenized
with spaCy's tokenizer for `--lang`, so the vectors see the tokens a pipeline looks up.
floret stores words and their character n-grams in one hashed table of `--bucket`
rows (each entry in 2 rows), so every word, also one never seen, gets a vector, and the
table's size is fixed: bucket x dim x 4 bytes.
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

import spacy

from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.output_files import atomic_output_path, check_output_file
from spacy_elmo.pretraining.corpus import blank_language


def tokenize(raw_text: Path, target: Path, lang: str) -> int:
    """Write RAW_TEXT's lines as space-separated spaCy tokens; returns the token count."""
    nlp = spacy.blank(lang)
    n_tokens = 0
    with raw_text.open("rb") as source, target.open("w", encoding="utf8") as out:
        for number, raw in enumerate(source, start=1):
            try:
                line = raw.decode("utf8").strip()
            except UnicodeDecodeError as err:
                raise SpacyElmoError(f"{raw_text}, line {number}: not valid UTF-8 ({err.reason})") from None
            if not line:
                continue
            # Long lines in pieces: spaCy's tokenizer refuses texts over nlp.max_length.
            for start in range(0, len(line), 100_000):
                words = [token.text for token in nlp.make_doc(line[start : start + 100_000]) if not token.is_space]
                out.write(" ".join(words) + "\n")
                n_tokens += len(words)
    return n_tokens


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("raw_text", type=Path)
    parser.add_argument("output", type=Path, help="the .floret vectors table to write")
    parser.add_argument("--lang", default="en")
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--bucket", type=int, default=50_000, help="rows of the hashed table")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--minn", type=int, default=4, help="shortest character n-gram")
    parser.add_argument("--maxn", type=int, default=5, help="longest character n-gram")
    parser.add_argument("--min-count", type=int, default=5, help="words seen fewer times are not trained as words")
    parser.add_argument("--threads", type=int, default=1,
                        help="1: the same vectors on every run; more are faster but not repeatable")
    args = parser.parse_args(argv)
    try:
        return _train(args)
    except SpacyElmoError as err:
        print(f"✘ {err}", file=sys.stderr)
        return 1


def _train(args: argparse.Namespace) -> int:
    import floret

    for name in ("dim", "bucket", "epochs", "minn", "maxn", "threads"):
        if getattr(args, name) < 1:
            raise SpacyElmoError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if not args.raw_text.is_file():
        raise SpacyElmoError(f"Raw text not found: {args.raw_text}")
    if blank_language(args.lang) is None:
        raise SpacyElmoError(f"--lang {args.lang}: not a spaCy language code")
    check_output_file(args.output, inputs=[args.raw_text])
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-vectors-") as scratch:
        tokens = Path(scratch) / "tokens.txt"
        n_tokens = tokenize(args.raw_text, tokens, args.lang)
        if n_tokens == 0:
            raise SpacyElmoError(f"{args.raw_text}: no text to train vectors on")
        print(f"Tokenized {args.raw_text}: {n_tokens:,} tokens; training floret vectors "
              f"(cbow, {args.dim} dims, {args.bucket:,} rows, {args.epochs} epochs)", flush=True)
        model = floret.train_unsupervised(
            str(tokens), model="cbow", mode="floret", hashCount=2, bucket=args.bucket, dim=args.dim,
            epoch=args.epochs, minn=args.minn, maxn=args.maxn, minCount=args.min_count,
            thread=args.threads, verbose=2,  # verbose 2: floret's progress line
        )
    with atomic_output_path(args.output) as tmp:
        model.save_floret_vectors(str(tmp))
    seconds = time.perf_counter() - start
    size = args.output.stat().st_size / 1e6
    print(f"Wrote {args.output} ({size:.1f} MB) in {seconds:.0f} s; next: python -m spacy init vectors "
          f"{args.lang} {args.output} VECTORS_DIR --mode floret")
    return 0


if __name__ == "__main__":
    sys.exit(main())
