"""Build the training and held-out text of the shipped English biLM from ../shared/data/raw_text.

Usage:
    python tools/prepare_english_corpus.py RAW_TEXT_DIR OUTPUT_DIR [--train-words 16000000]

Held out **by document** (never a paragraph of a held-out document in training):
- the last 300 articles of `wikipedia_en_recent.txt` and the last 30 of
  `wikipedia_en_2015_core.txt` (article starts found from the `_titles.tsv` files: an article's
  first paragraph starts with its title),
- the last book of `gutenberg_pd_en.txt` and the last 2 speeches of
  `us_presidential_speeches.txt` (from their `.tsv` manifests),
- the last 500 lines of `stackexchange_small.txt` (its posts carry no document boundaries; the
  tail is the last site's posts).
Training text: all the other paragraphs of those files (of the Gutenberg books every third
paragraph, so that modern text dominates), shuffled with a fixed seed and cut at `--train-words` words.
Writes OUTPUT_DIR/train.txt and OUTPUT_DIR/heldout.txt (one paragraph per line).

`wikipedia_en_2015_more.txt` (30M words that no shipped run has read) stays out of those two
files, so that they and the perplexities measured on them do not change. Its last 100 articles
go to OUTPUT_DIR/heldout_more.txt; with `--continue-file NAME`, OUTPUT_DIR/NAME holds its other
paragraphs (shuffled) followed by the whole shuffled training pool: a run over it reads the
unread text first, and its further passes read everything. With `--mix-continue` the unread text
and the pool are shuffled together instead, so that every stretch of the run mixes Wikipedia with
books, speeches and Stack Exchange as the held-out split does.
"""
import argparse
import csv
import random
from pathlib import Path
from typing import List, Tuple

from spacy_elmo.output_files import atomic_output_path


def read_lines(path: Path) -> List[str]:
    return path.read_text(encoding="utf8").splitlines()


def wikipedia_split(text: Path, titles: Path, n_heldout: int) -> Tuple[List[str], List[str]]:
    """Split before the first paragraph of the n-th last article."""
    lines = read_lines(text)
    with titles.open(encoding="utf8") as handle:
        names = [row[1] for row in csv.reader(handle, delimiter="\t") if len(row) > 1]
    for title in names[-n_heldout:]:
        starts = [i for i in range(len(lines) - 1, len(lines) // 2, -1) if lines[i].startswith(title)]
        if starts:
            cut = min(starts)
            return lines[:cut], lines[cut:]
    raise SystemExit(f"{text}: no article start found for the last {n_heldout} titles")


def count_words(lines: List[str]) -> int:
    return sum(len(line.split()) for line in lines)


def manifest_split(text: Path, manifest: Path, n_heldout: int) -> Tuple[List[str], List[str]]:
    lines = read_lines(text)
    with manifest.open(encoding="utf8") as handle:
        firsts = [int(row["first_line"]) for row in csv.DictReader(handle, delimiter="\t")]
    cut = firsts[-n_heldout] - 1
    return lines[:cut], lines[cut:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("raw_text", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--train-words", type=int, default=16_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--continue-file", default=None, help="also write the unread text, then the pool, here")
    parser.add_argument("--mix-continue", action="store_true", help="shuffle the unread text into the pool")
    args = parser.parse_args()
    raw = args.raw_text
    splits = {
        "wikipedia_recent": wikipedia_split(
            raw / "wikipedia_en_recent.txt", raw / "wikipedia_en_recent_titles.tsv", 300),
        "wikipedia_core": wikipedia_split(
            raw / "wikipedia_en_2015_core.txt", raw / "wikipedia_en_2015_core_titles.tsv", 30),
        "gutenberg": manifest_split(
            raw / "gutenberg_pd_en.txt", raw / "gutenberg_pd_en.books.tsv", 1),
        "speeches": manifest_split(
            raw / "us_presidential_speeches.txt", raw / "us_presidential_speeches.docs.tsv", 2),
    }
    stackexchange = read_lines(raw / "stackexchange_small.txt")
    splits["stackexchange"] = (stackexchange[:-500], stackexchange[-500:])
    rng = random.Random(args.seed)
    train: List[str] = []
    heldout: List[str] = []
    for name, (train_lines, heldout_lines) in splits.items():
        keep = train_lines[::3] if name == "gutenberg" else train_lines
        train.extend(line for line in keep if line.strip())
        heldout.extend(line for line in heldout_lines if line.strip())
        print(f"{name}: train {sum(len(l.split()) for l in keep):,} words, "
              f"held out {sum(len(l.split()) for l in heldout_lines):,} words")
    rng.shuffle(train)
    more_train, more_heldout = wikipedia_split(
        raw / "wikipedia_en_2015_more.txt", raw / "wikipedia_en_2015_more_titles.tsv", 100)
    more_train = [line for line in more_train if line.strip()]
    more_heldout = [line for line in more_heldout if line.strip()]
    random.Random(args.seed + 1).shuffle(more_train)
    print(f"wikipedia_more: train {count_words(more_train):,} words, held out {count_words(more_heldout):,} words")
    kept, words = [], 0
    for line in train:
        if words >= args.train_words:
            break
        kept.append(line)
        words += len(line.split())
    args.output.mkdir(parents=True, exist_ok=True)
    outputs = [("train.txt", kept), ("heldout.txt", heldout), ("heldout_more.txt", more_heldout)]
    if args.continue_file:
        continued = more_train + train
        if args.mix_continue:
            random.Random(args.seed + 2).shuffle(continued)
        outputs.append((args.continue_file, continued))
    for name, lines in outputs:
        with atomic_output_path(args.output / name) as tmp:
            tmp.write_text("\n".join(lines) + "\n", encoding="utf8")
        print(f"{name}: {len(lines):,} paragraphs, {count_words(lines):,} words")


if __name__ == "__main__":
    main()
