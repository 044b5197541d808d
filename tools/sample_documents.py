"""Take whole documents from a CoNLL-U or UNER IOB2 file, spread evenly over it.

Both formats are blank-line-separated sentence blocks where a `# newdoc id = ...`
comment opens each document. The selected documents (about `--sents` sentences)
go to OUTPUT unchanged, line for line; with `--rest`, the others go there, which
splits one file into two disjoint parts (the UNER dev file -> demo train/dev).
This is how the embedded sample in `assets/` was made from the full files.
"""
from pathlib import Path
from typing import List, Optional, Tuple

import typer

Document = List[str]  # sentence blocks, each without its trailing blank line


def read_documents(path: Path) -> List[Document]:
    """Split a file into documents of sentence blocks (a file without any
    `# newdoc` comment is one document)."""
    text = path.read_text(encoding="utf8")
    documents: List[Document] = []
    for block in text.split("\n\n"):
        block = block.strip("\n")
        if not block:
            continue
        if block.startswith("# newdoc") or not documents:
            documents.append([])
        documents[-1].append(block)
    return documents


def select_documents(documents: List[Document], n_sents: int) -> Tuple[List[int], List[int]]:
    """Indices of the documents to take (about `n_sents` sentences, a systematic
    sample over the file so every genre section contributes) and of the rest."""
    total = sum(len(doc) for doc in documents)
    fraction = min(1.0, n_sents / max(total, 1))
    quota = 0.0
    taken_sents = 0
    chosen, rest = [], []
    for i, doc in enumerate(documents):
        quota += len(doc) * fraction
        if taken_sents + len(doc) / 2 <= quota:
            chosen.append(i)
            taken_sents += len(doc)
        else:
            rest.append(i)
    return chosen, rest


def write_documents(documents: List[Document], indices: List[int], path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    blocks = [block for i in indices for block in documents[i]]
    path.write_text("".join(block + "\n\n" for block in blocks), encoding="utf8")
    return len(blocks)


def main(
    input_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="CoNLL-U or UNER IOB2 file"),
    output_path: Path = typer.Argument(..., help="Where the selected documents go"),
    sents: int = typer.Option(..., "--sents", min=1, help="About this many sentences"),
    rest_path: Optional[Path] = typer.Option(None, "--rest", help="Write the other documents here"),
) -> None:
    documents = read_documents(input_path)
    chosen, rest = select_documents(documents, sents)
    n_chosen = write_documents(documents, chosen, output_path)
    print(f"{output_path}: {len(chosen)} documents, {n_chosen} sentences")
    if rest_path is not None:
        n_rest = write_documents(documents, rest, rest_path)
        print(f"{rest_path}: {len(rest)} documents, {n_rest} sentences")


if __name__ == "__main__":
    typer.run(main)
