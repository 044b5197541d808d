"""`BiLMOptions`: the named sizes, from the package's top level, and one changed."""
import pytest

from spacy_elmo import NAMED_SIZES, BiLMOptions
from spacy_elmo.errors import OptionsError, SettingsError


def test_a_named_size_with_changes_checked_as_options_json_is():
    assert BiLMOptions.named("small") == NAMED_SIZES["small"]
    wider = BiLMOptions.named("compact", lstm_dim=1024, n_layers=3)
    assert (wider.lstm_dim, wider.n_layers, wider.projection_dim) == (1024, 3, 128)
    with pytest.raises(SettingsError, match="^Unknown biLM size 'huge'; choose from tiny, compact, small, medium, original$"):
        BiLMOptions.named("huge")
    with pytest.raises(OptionsError, match=r"^BiLMOptions.named\('tiny'\): lstm.dim must be at least 1, got 0$"):
        BiLMOptions.named("tiny", lstm_dim=0)
