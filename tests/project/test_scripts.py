"""The project's scripts on small inputs: conversion, splitting, comparison, input checks."""
import json
import os
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from .conftest import REPO, head_blocks, load_script

convert = load_script("convert")
split_text = load_script("split_text")
treebank_words = load_script("treebank_words")
compare = load_script("compare")
check_inputs = load_script("check_inputs")

UNER = """# newdoc id = doc-1
# sent_id = doc-1-0001
# text = Alice met Bob in New York .
1\tAlice\tB-PER\t-\t-
2\tmet\tO\t-\t-
3\tBob\tB-PER\t-\t-
4\tin\tO\t-\t-
5\tNew\tB-LOC\t-\t-
6\tYork\tI-LOC\t-\t-
7\t.\tO\t-\t-

# sent_id = doc-1-0002
1\tHi\tO\t-\t-

# newdoc id = doc-2
# sent_id = doc-2-0001
1\tAcme\tB-ORG\t-\t-
2\tCorp\tI-ORG\t-\t-

"""

# Synthetic lines in the CoNLL-2003 layout (the real corpus is research-only).
CONLL = """-DOCSTART- -X- -X- O

Acme NNP B-NP B-ORG
hires VBZ B-VP O
Danish JJ B-NP B-MISC

Ada NNP B-NP B-PER
Lovelace NNP I-NP I-PER

-DOCSTART- -X- -X- O

Globex NNP B-NP I-ORG
grew VBD B-VP O
"""


def read_docs(path: Path):
    nlp = spacy.blank("en")
    return list(DocBin().from_disk(path).get_docs(nlp.vocab))


def test_convert_uner_keeps_documents_sentences_and_entities(tmp_path: Path):
    source = tmp_path / "x.iob2"
    source.write_text(UNER, encoding="utf8")
    n_docs, n_sents, n_ents = convert.convert(source, tmp_path / "x.spacy", layout="uner", n_sents=10)
    assert (n_docs, n_sents, n_ents) == (2, 3, 4)
    first, second = read_docs(tmp_path / "x.spacy")
    assert [(e.text, e.label_) for e in first.ents] == [("Alice", "PER"), ("Bob", "PER"), ("New York", "LOC")]
    assert [s.text for s in first.sents] == ["Alice met Bob in New York .", "Hi"]
    assert [(e.text, e.label_) for e in second.ents] == [("Acme Corp", "ORG")]


def test_convert_conll_splits_on_docstart_and_reads_iob1(tmp_path: Path):
    source = tmp_path / "x.conll"
    source.write_text(CONLL, encoding="utf8")
    assert convert.convert(source, tmp_path / "x.spacy", layout="conll", n_sents=1) == (3, 3, 4)
    docs = read_docs(tmp_path / "x.spacy")
    assert [t.text for t in docs[0]] == ["Acme", "hires", "Danish"]  # no -DOCSTART- token
    assert [(e.text, e.label_) for e in docs[2].ents] == [("Globex", "ORG")]  # IOB1: I- opens an entity


def test_convert_conllu_writes_the_named_file(tmp_path: Path):
    source = head_blocks(REPO / "assets/ud_english_ewt/en_ewt-ud-dev.sample.conllu", tmp_path / "d.conllu", 12)
    n_docs, n_sents, _ = convert.convert(source, tmp_path / "out" / "dev.spacy", layout="conllu", n_sents=10)
    assert (n_docs, n_sents) == (2, 12)
    doc = read_docs(tmp_path / "out" / "dev.spacy")[0]
    assert doc[0].dep_ and doc[0].tag_ and doc[0].pos_


CONTRACTIONS = """# text = Gosto do livro.
1\tGosto\tgostar\tVERB\t_\t_\t0\troot\t_\t_
2-3\tdo\t_\t_\t_\t_\t_\t_\t_\t_
2\tde\tde\tADP\t_\t_\t4\tcase\t_\t_
3\to\to\tDET\t_\t_\t4\tdet\t_\t_
4\tlivro\tlivro\tNOUN\t_\t_\t1\tobl\t_\tSpaceAfter=No
5\t.\t.\tPUNCT\t_\t_\t1\tpunct\t_\t_

# text = I don't go.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

"""


@pytest.mark.parametrize(
    "lang,words,expected",
    [
        # Portuguese: the tokenizer keeps "do" whole, so it is one token; "don't" it does not split.
        ("pt", "tokenizer", ["Gosto do livro.", "Gosto|do|livro|.", "I don't go.", "I|don't|go|."]),
        # English: the tokenizer splits "don't" into the treebank's words, which stay.
        ("en", "tokenizer", ["Gosto do livro.", "Gosto|do|livro|.", "I don't go.", "I|do|n't|go|."]),
        ("pt", "treebank", ["Gosto deo livro.", "Gosto|de|o|livro|.", "I don't go.", "I|do|n't|go|."]),
    ],
)
def test_convert_conllu_words_are_the_tokenizers(tmp_path: Path, lang: str, words: str, expected):
    source = tmp_path / "c.conllu"
    source.write_text(CONTRACTIONS, encoding="utf8")
    convert.convert(source, tmp_path / "c.spacy", layout="conllu", n_sents=1, words=words, lang=lang)
    docs = read_docs(tmp_path / "c.spacy")
    assert [part for doc in docs for part in (doc.text.strip(), "|".join(t.text for t in doc))] == expected
    if words == "tokenizer":  # the merged token keeps its head and its words' tags
        assert (docs[0][1].dep_, docs[0][1].head.text, docs[0][1].tag_) == ("case", "livro", "ADP_DET")


@pytest.mark.parametrize(
    "text,layout,message",
    [
        ("1\tfoo\tX-PER\t-\t-\n", "uner", "x.txt:1: invalid NER tag 'X-PER'"),
        ("1 foo\n\n2\tbar\n", "uner", "x.txt:1: expected tab-separated"),
        ("\n\n", "conll", "no sentences found"),
    ],
)
def test_convert_bad_input_names_file_and_line(tmp_path: Path, text: str, layout: str, message: str):
    source = tmp_path / "x.txt"
    source.write_text(text, encoding="utf8")
    with pytest.raises(convert.InputFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        convert.convert(source, tmp_path / "x.spacy", layout=layout, n_sents=10)
    assert not (tmp_path / "x.spacy").exists()


def test_split_text_holds_out_every_nth_line_up_to_a_cap(tmp_path: Path):
    source = tmp_path / "raw.txt"
    source.write_text("".join(f"line {i}\n\n" for i in range(1, 101)), encoding="utf8")
    n_train, n_heldout = split_text.split_lines(source, tmp_path / "t.txt", tmp_path / "h.txt", every=10, max_heldout=4)
    assert (n_train, n_heldout) == (96, 4)
    assert (tmp_path / "h.txt").read_text().splitlines() == ["line 10", "line 20", "line 30", "line 40"]
    assert "line 50" in (tmp_path / "t.txt").read_text()


def _one_line_refusal(capsys) -> str:
    """The message of a script's `msg.fail` (wasabi wraps it at 80 columns)."""
    out = capsys.readouterr().out
    assert "Traceback" not in out and out.count("✘") == 1, out
    return " ".join(out.split())


@pytest.mark.parametrize("args,message", [
    (["little.txt", "train.txt", "heldout.txt"], "little.txt: too little text to split (2 training, 0 held-out lines)"),
    (["raw.txt", "raw.txt", "heldout.txt"], "Output path raw.txt is the input raw.txt: refusing to overwrite it"),
    (["raw.txt", "train.txt", "raw.txt"], "Output path raw.txt is the input raw.txt: refusing to overwrite it"),
    (["raw.txt", "train.txt", "train.txt"], "Output path train.txt is also the output train.txt: give each output its own path"),
    (["raw.txt", "train.txt", "pipe"], "Output path pipe is a FIFO (named pipe), not a regular file: refusing to replace it"),
], ids=["too little text", "train is the input", "held-out is the input", "train is held-out", "a FIFO"])
def test_split_text_refuses_before_it_writes_anything(tmp_path: Path, monkeypatch, capsys, args, message):
    """Issue 60: outputs were replaced before "too little text", the input was overwritten, and
    train = held-out reported success and lost the held-out lines."""
    from ..robustness.conftest import snapshot

    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw.txt").write_text("".join(f"line {i}\n" for i in range(30)), encoding="utf8")
    (tmp_path / "little.txt").write_text("one\ntwo\n", encoding="utf8")
    (tmp_path / "train.txt").write_text("an earlier split\n", encoding="utf8")
    (tmp_path / "heldout.txt").write_text("an earlier split\n", encoding="utf8")
    os.mkfifo(tmp_path / "pipe")
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit):
        split_text.main(*map(Path, args), every=5, max_heldout=1000)
    assert message in _one_line_refusal(capsys)
    assert snapshot(tmp_path) == before


def _conllu_row(index: str, form: str) -> str:
    return "\t".join([index, form] + ["_"] * 8)


# "do" is written as "de o" twice and left whole once; "nos" is split once and a word of its own
# twice; "trata-se" splits its clitic off after the hyphen.
TREEBANK = "\n".join([
    "# text = do do do nos nos nos trata-se", _conllu_row("1-2", "do"), _conllu_row("1", "de"),
    _conllu_row("2", "o"), _conllu_row("3-4", "Do"), _conllu_row("3", "De"), _conllu_row("4", "o"),
    _conllu_row("5", "do"), _conllu_row("6-7", "nos"), _conllu_row("6", "em"), _conllu_row("7", "os"),
    _conllu_row("8", "nos"), _conllu_row("9", "nos"), _conllu_row("10-11", "trata-se"),
    _conllu_row("10", "trata"), _conllu_row("11", "se"), "", "",
])


def test_treebank_words_splits_the_forms_the_treebank_mostly_splits(tmp_path: Path):
    treebank = tmp_path / "train.conllu"
    treebank.write_text(TREEBANK, encoding="utf8")
    table, clitics = treebank_words.learn_splits(treebank)
    assert table == {"do": ("de", "o"), "trata-se": ("trata", "se")} and clitics == {"se"}
    raw = tmp_path / "raw.txt"
    raw.write_text("Do alto, nos disse: DO lado vira-se do mar.\n", encoding="utf8")
    n_lines, n_split = treebank_words.rewrite(raw, tmp_path / "words.txt", table, clitics, "pt")
    assert (n_lines, n_split) == (1, 4)
    words = (tmp_path / "words.txt").read_text(encoding="utf8")
    assert words == "De o alto , nos disse : DE O lado vira se de o mar .\n"


def test_treebank_words_names_the_line_of_a_bad_treebank(tmp_path: Path):
    treebank = tmp_path / "train.conllu"
    treebank.write_text("# text = x\n" + _conllu_row("1", "x") + "\nx-y\tz\n", encoding="utf8")
    with pytest.raises(treebank_words.TreebankError, match=r"train.conllu:3: 2 columns"):
        treebank_words.learn_splits(treebank)


def test_treebank_words_refuses_an_unknown_language_with_one_line(tmp_path: Path, capsys):
    (tmp_path / "raw.txt").write_text("do\n", encoding="utf8")
    (tmp_path / "train.conllu").write_text(TREEBANK, encoding="utf8")
    with pytest.raises(SystemExit):
        treebank_words.main(tmp_path / "raw.txt", tmp_path / "words.txt", tmp_path / "train.conllu", "zz")
    assert "--lang zz: not a spaCy language code" in capsys.readouterr().out
    assert not (tmp_path / "words.txt").exists()


def test_treebank_words_refuses_a_multiword_token_left_open_at_the_end_of_its_sentence(tmp_path: Path):
    """Issue 60: the range 2-3 took the next sentence's first word ("o") as its second."""
    treebank = tmp_path / "train.conllu"
    rows = ["# text = a do", _conllu_row("1", "a"), _conllu_row("2-3", "do"), _conllu_row("2", "de"), "",
            "# text = o x", _conllu_row("1", "o"), _conllu_row("2", "x"), "", ""]
    treebank.write_text("\n".join(rows), encoding="utf8")
    with pytest.raises(treebank_words.TreebankError) as refusal:
        treebank_words.learn_splits(treebank)
    assert str(refusal.value) == (
        f"{treebank}:3: the multiword token 2-3 'do' does not get all its words before the sentence ends (line 5)"
    )


@pytest.mark.parametrize("output,lang,message", [
    ("raw.txt", "pt", "Output path raw.txt is the input raw.txt: refusing to overwrite it"),
    ("train.conllu", "pt", "Output path train.conllu is the input train.conllu: refusing to overwrite it"),
    ("words.txt", "en.stop_words", "--lang en.stop_words: not a spaCy language code"),
], ids=["output is the raw text", "output is the treebank", "--lang en.stop_words"])
def test_treebank_words_refuses_before_it_writes_anything(tmp_path: Path, monkeypatch, capsys, output, lang, message):
    from ..robustness.conftest import snapshot

    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw.txt").write_text("do mar\n", encoding="utf8")
    (tmp_path / "train.conllu").write_text(TREEBANK, encoding="utf8")
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit):
        treebank_words.main(Path("raw.txt"), Path(output), Path("train.conllu"), lang)
    assert message in _one_line_refusal(capsys)
    assert snapshot(tmp_path) == before


def test_compare_table_and_chart(tmp_path: Path):
    systems = (("baseline", 0.5, 2000.0), ("vectors", 0.55, 1900.0), ("elmo", 0.625, 1000.0), ("elmo_vectors", 0.65, 950.0))
    for task, keys in (("ud", ("tag_acc", "dep_uas", "dep_las")), ("ner", ("ents_p", "ents_r", "ents_f"))):
        for system, value, speed in systems:
            if task == "ner" and system == "elmo_vectors":
                continue  # a pipeline not evaluated is left out, not an error
            (tmp_path / f"{task}_{system}.json").write_text(json.dumps({**{k: value for k in keys}, "speed": speed}))
    log = tmp_path / "metrics.jsonl"
    log.write_text(
        "\n".join(json.dumps(r) for r in [
            {"kind": "dev", "step": 0, "dev_perplexity": 900.0},
            {"kind": "train", "step": 10, "train_perplexity": 500.0},
            {"kind": "dev", "step": 10, "dev_perplexity": 400.0, "dev_perplexity_forward": 390.0, "dev_perplexity_backward": 410.0},
        ]) + "\n{cut short"
    )
    rows = compare.collect_rows([tmp_path])
    assert [(r["task"], r["metric"]) for r in rows if r["key"] != "speed"] == [
        ("UD", "XPOS"), ("UD", "UAS"), ("UD", "LAS"),
        ("NER", "NER P"), ("NER", "NER R"), ("NER", "NER F"),
    ]
    assert [r["metric"] for r in rows if r["main"]] == ["LAS", "NER F"]
    train, dev = compare.read_pretraining_log(log)
    table = compare.markdown_table(rows, dev, "test")
    assert "| Task | Metric | baseline (CNN) | + vectors | + ELMo | + ELMo + vectors |" in table
    assert "| UD | LAS | 50.00 | 55.00 (+5.00) | 62.50 (+12.50) | 65.00 (+15.00) |" in table
    assert "| NER | NER F | 50.00 | 55.00 (+5.00) | 62.50 (+12.50) | – |" in table
    assert "| UD | words/s | 2,000 | 1,900 (0.95×) | 1,000 (0.50×) | 950 (0.47×) |" in table
    assert "| UD | s per 1,000 words | 0.500 s | 0.526 s | 1.000 s | 1.053 s |" in table
    assert "held-out perplexity at step 10: 400.0 (average), 390.0 (forward), 410.0 (backward), from 900.0 at step 0" in table
    compare.draw_chart(rows, train, dev, tmp_path / "compare.png", "test")
    assert (tmp_path / "compare.png").read_bytes().startswith(b"\x89PNG")
    assert "raw text" in table and "gold sentences |" not in table


def test_compare_shows_the_gold_sentence_scores_beside_the_raw_text_ones(tmp_path: Path):
    for system, raw, gold in (("baseline", 0.70, 0.80), ("elmo", 0.75, 0.84)):
        (tmp_path / f"ud_{system}.json").write_text(json.dumps({"dep_las": raw, "speed": 1000.0}))
        (tmp_path / f"ud_{system}_sentences.json").write_text(json.dumps({"dep_las": gold, "speed": 900.0}))
    table = compare.markdown_table(compare.collect_rows([tmp_path]), [], "t")
    assert "| UD | LAS | 70.00 | 75.00 (+5.00) |" in table
    assert "| UD | LAS, gold sentences | 80.00 | 84.00 (+4.00) |" in table


def test_compare_averages_runs_of_several_seeds(tmp_path: Path):
    for seed, (base, elmo, base_speed, elmo_speed) in enumerate([(0.80, 0.84, 900.0, 400.0), (0.82, 0.85, 1000.0, 500.0),
                                                                  (0.84, 0.89, 2000.0, 450.0)]):
        for system, score, speed in (("baseline", base, base_speed), ("elmo", elmo, elmo_speed)):
            path = tmp_path / f"seed{seed}" / f"ner_{system}.json"
            path.parent.mkdir(exist_ok=True)
            path.write_text(json.dumps({"ents_p": score, "ents_r": score, "ents_f": score, "speed": speed}))
    dirs = [tmp_path / f"seed{seed}" for seed in range(3)]
    rows = compare.collect_rows(dirs)
    f1 = next(row for row in rows if row["main"])
    assert f1["scores"]["baseline"] == pytest.approx(0.82) and f1["scores"]["elmo"] == pytest.approx(0.86)
    assert next(row for row in rows if row["key"] == "speed")["scores"] == {"baseline": 1000.0, "elmo": 450.0}  # medians
    table = compare.markdown_table(rows, [], "three seeds")
    assert "| NER | NER F | 82.00 | 86.00 (+4.00) |" in table
    assert "| NER | NER F, each run | 80.00 / 82.00 / 84.00 | 84.00 / 85.00 / 89.00 |" in table
    assert "Means of 3 runs (words/s: the median)." in table

    (dirs[2] / "ner_elmo.json").unlink()
    with pytest.raises(SystemExit):
        compare.collect_rows(dirs)


def test_project_inputs_are_the_workflow_deps_no_step_writes():
    config = {
        "workflows": {"w": ["a", "b"], "v": ["c"]},
        "commands": [
            {"name": "a", "deps": ["data/x.txt"], "outputs": ["corpus/x.spacy", "model/weights.hdf5"]},
            {"name": "b", "deps": ["corpus/x.spacy", "model", "configs/c.cfg", "data/x.txt"]},
            {"name": "c", "deps": ["model", "configs/d.cfg"]},  # another workflow's step wrote it
            {"name": "maintenance", "deps": ["data/full.txt"], "outputs": ["data/x.txt"]},  # in no workflow
        ],
    }
    assert check_inputs.project_inputs(config) == ["data/x.txt", "configs/c.cfg", "configs/d.cfg"]


def test_missing_input_explanation_names_the_asset_source_and_the_vars():
    config = {
        "vars": {"data_dir": "assets/full", "ud_train": "assets/full/ud/train.conllu", "lang": "en"},
        "assets": [{"dest": "assets/full/ud/train.conllu", "url": "https://example.org/train.conllu", "extra": True, "description": "UD train"}],
    }
    text = check_inputs.explain("assets/full/ud/train.conllu", config)
    assert "What it is: UD train." in text
    assert "python -m spacy project assets --extra" in text and "https://example.org/train.conllu" in text
    assert "--vars.ud_train or --vars.data_dir" in text
    # A var that the overrides variable sets is changed there: the command line cannot override it.
    text = check_inputs.explain("assets/full/ud/train.conllu", config, env_names=["ud_train"])
    assert "vars.ud_train in WEASEL_CONFIG_OVERRIDES (e.g. a copy of configs/full.vars) or --vars.data_dir" in text


@pytest.mark.slow
def test_train_vectors_writes_floret_vectors_that_spacy_loads(tmp_path: Path):
    import subprocess
    import sys

    train_vectors = load_script("train_vectors")
    text = tmp_path / "raw.txt"
    text.write_text("The bank of the river was muddy.\nShe went to the bank to get money.\n" * 50, encoding="utf8")
    floret_file = tmp_path / "vectors.floret"
    args = [str(text), str(floret_file), "--dim", "8", "--bucket", "500", "--epochs", "1", "--min-count", "1"]
    assert train_vectors.main(args) == 0
    first = floret_file.read_bytes()
    assert train_vectors.main(args) == 0 and floret_file.read_bytes() == first  # one thread: repeatable
    rows, dim, *_ = floret_file.read_text(encoding="utf8").splitlines()[0].split()
    assert (int(rows), int(dim)) == (500, 8)
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith(".")]  # no temporary files left
    done = subprocess.run([sys.executable, "-m", "spacy", "init", "vectors", "en", str(floret_file), str(tmp_path / "spacy"),
                           "--mode", "floret"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    nlp = spacy.load(tmp_path / "spacy")
    assert nlp.vocab.vectors.shape == (500, 8) and nlp("riverbank")[0].has_vector  # floret: any word has a vector


@pytest.mark.parametrize("args,message", [
    (["missing.txt", "out.floret"], "Raw text not found: missing.txt"),
    (["raw.txt", "raw.txt"], "is the input raw.txt"),
    (["raw.txt", "out.floret", "--dim", "0"], "--dim must be at least 1, got 0"),
    (["empty.txt", "out.floret"], "empty.txt: no text to train vectors on"),
    (["raw.txt", "out.floret", "--lang", "en.stop_words"], "--lang en.stop_words: not a spaCy language code"),
])
def test_train_vectors_refuses_bad_input_with_one_line(tmp_path: Path, monkeypatch, capsys, args, message):
    train_vectors = load_script("train_vectors")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw.txt").write_text("some words here\n", encoding="utf8")
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf8")
    before = sorted(path.name for path in tmp_path.iterdir())
    assert train_vectors.main(args) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert sorted(path.name for path in tmp_path.iterdir()) == before


evaluate_script = load_script("evaluate")


def test_evaluate_writes_raw_text_and_one_sentence_scores_per_pipeline(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    pipelines = []
    for name in ("ud_baseline", "ud_elmo"):
        path = tmp_path / "training" / name / "model-best"
        path.parent.mkdir(parents=True)
        nlp.to_disk(path)
        pipelines.append(path)
    reference = nlp("One sentence here. And a second one.")
    for token in reference:
        token.is_sent_start = token.i in (0, 4)
    data = tmp_path / "dev.spacy"
    DocBin(docs=[reference]).to_disk(data)
    evaluate_script.main(data, tmp_path / "metrics", pipelines, gpu_id=-1)
    assert sorted(p.name for p in (tmp_path / "metrics").iterdir()) == [
        "ud_baseline.json", "ud_baseline_sentences.json", "ud_elmo.json", "ud_elmo_sentences.json",
    ]
    raw = json.loads((tmp_path / "metrics" / "ud_elmo.json").read_text())
    assert raw["sents_f"] == 1.0 and raw["speed"] > 0  # what `spacy evaluate --output` writes
    assert evaluate_script.output_name(Path("training/sample/ner_elmo/model-best")) == "ner_elmo"
    with pytest.raises(SystemExit):
        evaluate_script.main(data, tmp_path / "metrics", [pipelines[0], pipelines[0]], gpu_id=-1)
