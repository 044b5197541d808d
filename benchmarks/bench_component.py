"""Throughput of the `elmo` pipeline component: `nlp.pipe` over UD English-EWT dev sentences.

A randomly initialised biLM of a named size (`size` in the component's model
config), spaCy's English tokenizer, sentences in their natural order; median of
the repeats after one warm-up pass. Uses only the public spaCy API, so the same
script times any version of spacy-elmo (PYTHONPATH=that checkout).

    flock /tmp/spacy-elmo-heavy.lock python benchmarks/bench_component.py --size small --batch-sizes 1 32
"""
import argparse
import random
import statistics
import time
from pathlib import Path
from typing import List

DEFAULT_CONLLU = Path(__file__).resolve().parents[2] / "shared/data/ud_english_ewt/en_ewt-ud-dev.conllu"


def read_texts(path: Path, n: int, seed: int) -> List[str]:
    """`n` sentence texts (the `# text =` lines) drawn at random from a CoNLL-U file."""
    texts = [line[len("# text = "):] for line in path.read_text(encoding="utf8").splitlines() if line.startswith("# text = ")]
    return random.Random(seed).sample(texts, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="small", choices=["fixture", "compact", "small", "medium", "original"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--n-sentences", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--conllu", type=Path, default=DEFAULT_CONLLU)
    args = parser.parse_args()

    import spacy
    import torch

    torch.manual_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"size": args.size}})
    nlp.initialize()
    texts = read_texts(args.conllu, args.n_sentences, seed=0)
    n_tokens = sum(len(doc) for doc in nlp.tokenizer.pipe(texts))
    for batch_size in args.batch_sizes:
        list(nlp.pipe(texts[:32], batch_size=batch_size))  # warm-up
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for _doc in nlp.pipe(texts, batch_size=batch_size):
                pass
            seconds.append(time.perf_counter() - start)
        median = statistics.median(seconds)
        print(
            f"elmo component, {args.size}, nlp.pipe batch_size {batch_size}: {n_tokens} tokens, "
            f"median {median:.2f} s of {args.repeats} -> {n_tokens / median:,.0f} tokens/s",
            flush=True,
        )


if __name__ == "__main__":
    main()
