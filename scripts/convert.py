"""Convert a treebank or an NER file to a spaCy `.spacy` DocBin at a path of your choice.

Three layouts:
- `conllu`: Universal Dependencies CoNLL-U, through spaCy's own converter
  (`spacy convert --converter conllu`, which names its output after the input);
- `uner`: UNER's IOB2 files, tab-separated `index, token, tag, -, annotator`,
  `#` comment lines (`# newdoc id = ...` opens a document), blank line between
  sentences. spaCy has no converter for it.
- `conll`: CoNLL-2003 style, space-separated columns with the token first and the
  NER tag last, `-DOCSTART-` lines between documents (spaCy's own `ner`
  converter needs the exact line `-DOCSTART- -X- O O`, which these files lack).

Each output Doc holds `--n-sents` sentences (of one document, for the NER
layouts), with sentence boundaries set. NER tags may be IOB1 or IOB2.

CoNLL-U words (`--words`): a pipeline meets spaCy's tokens, so by default
(`tokenizer`) a multiword token (`1-2 do` = `de` + `o`) stays split into its
syntactic words only where spaCy's tokenizer for `--lang` splits its form into
those same words (English "don't" = "do" + "n't"), and is one token otherwise,
as `spacy convert --merge-subtokens` makes it (Portuguese "do", "pela"); its
tags are joined ("ADP_DET"). `treebank` keeps the treebank's words, for
pipelines trained and scored on them (gold_preproc = true).
"""
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

import spacy
import typer
from spacy.tokens import Doc, DocBin
from spacy.training import biluo_tags_to_spans, iob_to_biluo
from spacy.training.converters import conllu_to_docs
from spacy.vocab import Vocab
from wasabi import msg

from spacy_elmo.output_files import atomic_output_path

Sentence = List[Tuple[str, str]]  # (token, tag)
FORMATS = ("conllu", "uner", "conll")
WORDS = ("tokenizer", "treebank")


class InputFormatError(ValueError):
    pass


def read_sentences(path: Path, layout: str) -> Iterator[Tuple[bool, Sentence]]:
    """Yield `(starts_document, sentence)` pairs; tags are checked on the way."""
    sentence: Sentence = []
    new_document = True
    with path.open(encoding="utf8") as lines:
        for line_no, line in enumerate(lines, start=1):
            line = line.rstrip("\n")
            where = f"{path}:{line_no}"
            if not line.strip():
                if sentence:
                    yield new_document, sentence
                    sentence, new_document = [], False
                continue
            if layout == "uner":
                if line.startswith("#"):
                    new_document = new_document or line.startswith("# newdoc")
                    continue
                columns = line.split("\t")
                if len(columns) < 3:
                    raise InputFormatError(
                        f"{where}: expected tab-separated 'index, token, tag, ...' (UNER IOB2), got {line!r}"
                    )
                token, tag = columns[1], columns[2]
            else:
                columns = line.split()
                if columns[0] == "-DOCSTART-":
                    new_document = True
                    continue
                if len(columns) < 2:
                    raise InputFormatError(f"{where}: expected 'token ... tag' columns (CoNLL), got {line!r}")
                token, tag = columns[0], columns[-1]
            if tag != "O" and not (tag[:2] in ("B-", "I-") and len(tag) > 2):
                raise InputFormatError(f"{where}: invalid NER tag {tag!r} (expected O, B-TYPE or I-TYPE)")
            sentence.append((token, tag))
    if sentence:
        yield new_document, sentence


def make_doc(vocab: Vocab, sentences: List[Sentence]) -> Doc:
    words = [token for sentence in sentences for token, _ in sentence]
    sent_starts = [i == 0 for sentence in sentences for i in range(len(sentence))]
    doc = Doc(vocab, words=words, sent_starts=sent_starts)
    tags = [tag for sentence in sentences for _, tag in sentence]
    doc.ents = biluo_tags_to_spans(doc, iob_to_biluo(tags))
    return doc


def ner_docs(input_path: Path, *, layout: str, n_sents: int) -> Iterator[Doc]:
    vocab = Vocab()
    pending: List[Sentence] = []
    for starts_document, sentence in read_sentences(input_path, layout):
        if pending and (starts_document or len(pending) >= n_sents):
            yield make_doc(vocab, pending)
            pending = []
        pending.append(sentence)
    if pending:
        yield make_doc(vocab, pending)


def split_where_the_tokenizer_splits(lines: List[str], tokenize: Callable[[str], List[str]]) -> List[str]:
    """CoNLL-U lines without the range line of each multiword token that
    `tokenize` splits into its words, whose spacing then goes on those words."""
    kept: List[str] = []
    i = 0
    while i < len(lines):
        columns = lines[i].split("\t")
        if len(columns) == 10 and "-" in columns[0]:
            first, last = (int(n) for n in columns[0].split("-"))
            words = lines[i + 1 : i + 2 + last - first]
            if tokenize(columns[1]) == [word.split("\t")[1] for word in words]:
                space_after = "SpaceAfter=No" not in columns[9].split("|")
                kept.extend(_spaced(word, j == len(words) - 1 and space_after) for j, word in enumerate(words))
                i += 1 + len(words)
                continue
        kept.append(lines[i])
        i += 1
    return kept


def _spaced(line: str, space_after: bool) -> str:
    columns = line.split("\t")
    misc = [item for item in columns[9].split("|") if item not in ("_", "SpaceAfter=No")]
    misc += [] if space_after else ["SpaceAfter=No"]
    return "\t".join(columns[:9] + ["|".join(misc) or "_"])


def conllu_docs(input_path: Path, *, n_sents: int, words: str, lang: str) -> Iterator[Doc]:
    text = input_path.read_text(encoding="utf8")
    if words == "tokenizer":
        tokenizer = spacy.blank(lang).tokenizer
        lines = split_where_the_tokenizer_splits(text.split("\n"), lambda form: [t.text for t in tokenizer(form)])
        text = "\n".join(lines)
    try:
        yield from conllu_to_docs(text, n_sents=n_sents, merge_subtokens=words == "tokenizer", no_print=True)
    except (ValueError, IndexError, KeyError) as err:
        raise InputFormatError(f"{input_path}: not valid CoNLL-U ({err})") from None


def convert(
    input_path: Path, output_path: Path, *, layout: str, n_sents: int, words: str = "tokenizer", lang: str = "en"
) -> Tuple[int, int, int]:
    """Write the DocBin (to a temp file, then renamed); returns (docs, sentences, entities)."""
    if layout == "conllu":
        docs = conllu_docs(input_path, n_sents=n_sents, words=words, lang=lang)
    else:
        docs = ner_docs(input_path, layout=layout, n_sents=n_sents)
    doc_bin = DocBin(store_user_data=False)
    n_sentences = n_entities = 0
    for doc in docs:
        n_sentences += sum(1 for _ in doc.sents)
        n_entities += len(doc.ents)
        doc_bin.add(doc)
    if n_sentences == 0:
        raise InputFormatError(f"{input_path}: no sentences found (is it a {layout} file?)")
    with atomic_output_path(output_path) as tmp_path:
        doc_bin.to_disk(tmp_path)
    return len(doc_bin), n_sentences, n_entities


def main(
    input_path: Path = typer.Argument(..., help="CoNLL-U, UNER .iob2 or CoNLL-2003-style file"),
    output_path: Path = typer.Argument(..., help="Output .spacy file"),
    layout: str = typer.Option(..., "--format", help=f"Input layout: {', '.join(FORMATS)}"),
    n_sents: int = typer.Option(10, "--n-sents", min=1, help="Sentences per output Doc"),
    words: str = typer.Option("tokenizer", "--words", help=f"CoNLL-U words: {', '.join(WORDS)}"),
    lang: str = typer.Option("en", "--lang", help="The language whose tokenizer --words tokenizer follows"),
) -> None:
    if layout not in FORMATS:
        msg.fail(f"Unknown --format {layout!r}; use one of: {', '.join(FORMATS)}", exits=1)
    if words not in WORDS:
        msg.fail(f"Unknown --words {words!r}; use one of: {', '.join(WORDS)}", exits=1)
    if not input_path.is_file():
        msg.fail(f"Input file not found: {input_path}", exits=1)
    try:
        n_docs, n_sentences, n_entities = convert(
            input_path, output_path, layout=layout, n_sents=n_sents, words=words, lang=lang
        )
    except (InputFormatError, UnicodeDecodeError) as err:
        msg.fail(str(err), exits=1)
    msg.good(f"{output_path}: {n_docs} docs, {n_sentences} sentences, {n_entities} entities")


if __name__ == "__main__":
    typer.run(main)
