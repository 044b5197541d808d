"""The benchmark's baseline must compute the same vectors as the model it is compared with."""
import json
import sys
from pathlib import Path

import numpy
import torch

from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from reference_loop import reference_forward  # noqa: E402


def test_reference_loop_matches_the_state_reset_reference(fixture_bilm, allennlp_model_dir):
    reference = numpy.load(allennlp_model_dir / "derived" / "allennlp_layers_state_reset_bs1.npz")
    sentences = json.loads(str(reference["meta"]))["sentences"][:9]
    with torch.no_grad():
        layers = reference_forward(fixture_bilm, batch_to_char_ids(sentences)).numpy()
    assert numpy.allclose(layers, reference["layers"][:9, :, : layers.shape[2]], atol=1e-6)
