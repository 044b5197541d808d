"""Rewrite raw text into a treebank's syntactic words, so a biLM pretrained on it reads what the
treebank's pipelines give it.

UD treebanks split some surface tokens into several words (Portuguese "do" -> "de o", "na" ->
"em a", "trata-se" -> "trata se"), and spaCy trained with `gold_preproc` sees the words, while
raw text has the surface forms. The rule: **a form that the treebank's training file writes as a
multiword token in most of its occurrences is split as it splits it most often; a hyphenated form
ending in a part that the treebank splits off after a hyphen ("-se", "-lo") loses it the same
way.** Each output line is the input line's tokens (spaCy's tokenizer for `--lang`) joined by
spaces, with those forms replaced by their words in the original's case.

    python scripts/treebank_words.py raw_text.txt corpus/raw/words.txt --treebank ud-train.conllu --lang pt
"""
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Set, Tuple

import spacy
import typer
from wasabi import msg

from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.output_files import atomic_output_path, check_output_file
from spacy_elmo.pretraining.corpus import blank_language

Table = Dict[str, Tuple[str, ...]]


class TreebankError(ValueError):
    pass


def multiword_tokens(lines: Iterable[str], source: str) -> Iterator[Tuple[str, Tuple[str, ...]]]:
    """Every token of a CoNLL-U file as (surface form, its words); a plain token is its own word.
    A multiword token whose words do not all follow it in its sentence raises :class:`TreebankError`."""
    span_end, surface, words, opened = 0, "", [], ""  # the multiword token being read, and where it is

    def check_closed(before: str) -> None:
        if span_end:
            raise TreebankError(f"{opened} does not get all its words before {before}")

    number = 0
    for number, line in enumerate(lines, start=1):
        columns = line.rstrip("\n").split("\t")
        if not line.strip():
            check_closed(f"the sentence ends (line {number})")
        if not line.strip() or line.startswith("#") or "." in columns[0]:
            continue
        if len(columns) != 10:
            raise TreebankError(f"{source}:{number}: {len(columns)} columns, CoNLL-U has 10")
        first, _, last = columns[0].partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise TreebankError(f"{source}:{number}: token id {columns[0]!r} is not a number or range")
        if last or int(first) > span_end:
            check_closed(f"line {number}")
        if last:
            span_end, surface, words = int(last), columns[1], []
            opened = f"{source}:{number}: the multiword token {columns[0]} {surface!r}"
        elif int(first) <= span_end:
            words.append(columns[1])
            if int(first) == span_end:
                yield surface, tuple(words)
                span_end = 0
        else:
            yield columns[1], (columns[1],)
    check_closed(f"the end of the file (line {number})")


def learn_splits(treebank: Path) -> Tuple[Table, Set[str]]:
    """The forms to split (lowercased form -> its words) and the clitics split off after a hyphen."""
    expansions: Dict[str, Counter] = defaultdict(Counter)
    with treebank.open(encoding="utf8") as lines:
        for surface, words in multiword_tokens(lines, str(treebank)):
            expansions[surface.lower()][tuple(word.lower() for word in words)] += 1
    table, clitics = {}, set()
    for form, counts in expansions.items():
        splits = Counter({words: n for words, n in counts.items() if len(words) > 1})
        if 2 * sum(splits.values()) <= sum(counts.values()):
            continue
        words = table[form] = splits.most_common(1)[0][0]
        stem, hyphen, tail = form.rpartition("-")
        if hyphen and words == (stem, tail):
            clitics.add(tail)
    return table, clitics


def split_token(token: str, table: Table, clitics: Set[str]) -> List[str]:
    lower = token.lower()
    words = table.get(lower)
    if words is None:
        stem, hyphen, tail = lower.rpartition("-")
        if not (hyphen and stem and tail in clitics):
            return [token]
        words = (stem, tail)
    if token.isupper() and len(token) > 1:
        return [word.upper() for word in words]
    if token[0].isupper():
        return [words[0][:1].upper() + words[0][1:], *words[1:]]
    return list(words)


def rewrite(input_path: Path, output_path: Path, table: Table, clitics: Set[str], lang: str) -> Tuple[int, int]:
    """Returns (lines, tokens split)."""
    tokenizer = spacy.blank(lang).tokenizer
    n_lines = n_split = 0
    with atomic_output_path(output_path) as tmp, input_path.open(encoding="utf8") as lines, \
            tmp.open("w", encoding="utf8") as out:
        for doc in tokenizer.pipe(line.strip() for line in lines):
            words: List[str] = []
            for token in doc:
                parts = split_token(token.text, table, clitics)
                n_split += len(parts) > 1
                words.extend(parts)
            out.write(" ".join(words) + "\n")
            n_lines += 1
    return n_lines, n_split


def main(
    input_path: Path = typer.Argument(..., help="Raw text, UTF-8, one sentence or paragraph per line"),
    output_path: Path = typer.Argument(..., help="The same lines in the treebank's words"),
    treebank: Path = typer.Option(..., "--treebank", help="The treebank's training file (CoNLL-U)"),
    lang: str = typer.Option("en", "--lang", help="spaCy language code of the tokenizer"),
) -> None:
    for path, what in ((input_path, "raw text"), (treebank, "treebank")):
        if not path.is_file():
            msg.fail(f"{what} not found: {path}", exits=1)
    if blank_language(lang) is None:
        msg.fail(f"--lang {lang}: not a spaCy language code", exits=1)
    try:
        check_output_file(output_path, inputs=[input_path, treebank])
        table, clitics = learn_splits(treebank)
    except (SpacyElmoError, TreebankError) as err:
        msg.fail(str(err), exits=1)
    except UnicodeDecodeError as err:
        msg.fail(f"{treebank}: not UTF-8 text ({err.reason})", exits=1)
    try:
        n_lines, n_split = rewrite(input_path, output_path, table, clitics, lang)
    except UnicodeDecodeError as err:
        msg.fail(f"{input_path}: not UTF-8 text ({err.reason})", exits=1)
    msg.good(
        f"{output_path}: {n_lines:,} lines, {n_split:,} tokens split into the treebank's words "
        f"({len(table):,} forms and {len(clitics)} hyphenated clitics learned from {treebank.name})"
    )


if __name__ == "__main__":
    typer.run(main)
