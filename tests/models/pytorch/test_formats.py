"""The registry of model formats: which format reads a path, and a biLM's skeleton saved and rebuilt."""
from pathlib import Path

import pytest

from spacy_elmo.errors import OptionsError, SpacyElmoError
from spacy_elmo.models.pytorch import elmoformanylangs_format, formats, original_format
from spacy_elmo.models.pytorch.bilm import ElmoBiLM
from spacy_elmo.models.pytorch.options import NAMED_SIZES

ELMOFORMANYLANGS = Path(__file__).resolve().parents[2] / "fixtures" / "elmoformanylangs" / "char_only"


def test_an_elmoformanylangs_folder_is_read_by_its_format_and_every_other_path_by_bilm_tfs(allennlp_model_dir):
    assert formats.format_of(ELMOFORMANYLANGS) is elmoformanylangs_format
    assert formats.format_of(allennlp_model_dir) is original_format
    assert formats.format_of(allennlp_model_dir / "lm_weights.hdf5") is original_format
    assert formats.format_of(ELMOFORMANYLANGS.parent / "missing") is original_format  # it names what is missing
    assert formats.FORMATS[-1] is original_format


def test_load_model_reads_either_format(allennlp_model_dir):
    many = formats.load_model(ELMOFORMANYLANGS)
    assert isinstance(many.token_ids, elmoformanylangs_format.DictionaryIds)
    original = formats.load_model(allennlp_model_dir / "lm_weights.hdf5", allennlp_model_dir / "options.json")
    assert original.options == original_format.read_options(allennlp_model_dir / "options.json")


def test_model_files_are_the_weights_and_options_a_format_reads(allennlp_model_dir, tmp_path):
    assert elmoformanylangs_format.model_files(ELMOFORMANYLANGS) == (ELMOFORMANYLANGS, ELMOFORMANYLANGS / "config.json")
    with pytest.raises(OptionsError, match="is an ELMoForManyLangs model: its config.json names its model config"):
        elmoformanylangs_format.model_files(ELMOFORMANYLANGS, tmp_path / "options.json")
    with pytest.raises(OptionsError, match="is an ELMoForManyLangs model: its config.json names"):
        formats.load_model(ELMOFORMANYLANGS, tmp_path / "options.json")  # loading refuses it as well
    formats.load_model(ELMOFORMANYLANGS, ELMOFORMANYLANGS / "config.json")  # the options model_files gave
    weights, options = original_format.model_files(allennlp_model_dir)
    assert (weights.name, options.name) == ("lm_weights.hdf5", "options.json")


@pytest.mark.parametrize("which", ["bilm-tf", "ELMoForManyLangs"])
def test_a_described_skeleton_is_rebuilt_by_the_format_that_described_it(which):
    bilm = ElmoBiLM(NAMED_SIZES["tiny"]) if which == "bilm-tf" else formats.load_model(ELMOFORMANYLANGS)
    rebuilt = formats.rebuild(formats.describe(bilm))
    assert rebuilt.options == bilm.options and rebuilt.token_ids == bilm.token_ids
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {k: v.shape for k, v in bilm.state_dict().items()}


def test_a_saved_pipelines_options_alone_are_a_bilm_tf_skeleton():
    """Pipelines saved before the registry hold the options dict; they still load."""
    rebuilt = formats.rebuild(NAMED_SIZES["tiny"].to_dict())
    assert rebuilt.options == NAMED_SIZES["tiny"]


def test_a_biLM_of_token_ids_no_format_knows_is_refused_in_one_line():
    class Unknown:
        word_columns, pad_id = 0, 261
        boundary_rows = ((1,) * 50, (2,) * 50)

    bilm = ElmoBiLM(NAMED_SIZES["tiny"])
    bilm.token_ids = Unknown()
    with pytest.raises(SpacyElmoError, match="No model format describes a biLM of Unknown"):
        formats.describe(bilm)


def test_an_archive_is_checked_and_unpacked_by_the_archive_module_of_its_suffix(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from spacy_elmo.models.pytorch import elmoformanylangs_archive
    from spacy_elmo.models.pytorch.downloaded_files import verify_download

    assert formats.archive_of("cache/11/168.zip") is elmoformanylangs_archive
    assert formats.archive_of("weights.hdf5") is None and formats.archive_of(ELMOFORMANYLANGS) is None
    checked = []
    other = SimpleNamespace(SUFFIX=".tgz", LOCAL_HINT="", archive_members=lambda path, shown: checked.append(shown))
    monkeypatch.setattr(formats, "ARCHIVES", (*formats.ARCHIVES, other))
    (tmp_path / "m.tgz").write_bytes(b"an archive")
    verify_download(tmp_path / "m.tgz", "http://h/m.tgz?x=1")  # a new archive format: one line in ARCHIVES
    assert checked == ["http://h/m.tgz?x=1"]
