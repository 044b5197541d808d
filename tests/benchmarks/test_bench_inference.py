"""The inference benchmark runs a configuration (the GPU step's script calls it): a tiny biLM on a few sentences."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_inference  # noqa: E402

CONLLU = "".join(
    f"# sent_id = {i}\n" + "".join(f"{j}\t{word}\t_\t_\t_\t_\t_\t_\t_\t_\n" for j, word in enumerate(words, 1)) + "\n"
    for i, words in enumerate([["The", "cat", "sat", "."], ["Hello", "!"], ["A", "long", "day", "ends", "."]])
)


def test_one_configuration_reports_its_sentences_tokens_and_speed(tmp_path):
    (tmp_path / "dev.conllu").write_text(CONLLU, encoding="utf8")
    args = argparse.Namespace(
        implementation="spacy-elmo", size="tiny", model=None, batch_size=2, device="cpu", dtype="fp32", sort_window=1,
        threads=1, conllu=tmp_path / "dev.conllu", n_sentences=3, warmup=False, repeats=2,
    )
    result = bench_inference.run_one(args)
    assert (result["sentences"], result["tokens"], len(result["tokens_per_s"])) == (3, 11, 2)
    assert result["median_tokens_per_s"] > 0
