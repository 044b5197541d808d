import pytest
import torch

from spacy_elmo.models.pytorch.scalar_mix import ScalarMix


def test_weighted_sum_with_gamma():
    mix = ScalarMix(3, initial_weights=[0.0, 1.0, 2.0], initial_gamma=2.0)
    layers = torch.arange(3 * 2 * 4, dtype=torch.float32).reshape(3, 2, 4)
    weights = torch.softmax(torch.tensor([0.0, 1.0, 2.0]), 0)
    expected = 2.0 * (weights[:, None, None] * layers).sum(0)
    torch.testing.assert_close(mix(layers), expected)


def test_layer_norm_uses_unmasked_positions_only():
    mix = ScalarMix(2, do_layer_norm=True)
    layers = torch.randn(2, 3, 5, 4)
    mask = torch.tensor([[True] * 5, [True] * 2 + [False] * 3, [False] * 5])
    garbage = layers.clone()
    garbage[:, ~mask] = 1e6  # values at padding must not change the statistics
    torch.testing.assert_close(mix(layers, mask)[mask], mix(garbage, mask)[mask])
    normed = mix._layer_norm(layers, mask)[:, mask]
    torch.testing.assert_close(normed.mean(dim=(1, 2)), torch.zeros(2), atol=1e-6, rtol=0)
    torch.testing.assert_close(normed.var(dim=(1, 2), unbiased=False), torch.ones(2), atol=1e-4, rtol=0)


def test_gradients_and_frozen_mix():
    layers = torch.randn(3, 4, 8)
    mix = ScalarMix(3)
    mix(layers).sum().backward()
    assert mix.weights.grad is not None and mix.gamma.grad is not None
    frozen = ScalarMix(3, trainable=False)
    assert not frozen.weights.requires_grad and not frozen.gamma.requires_grad


def test_dropout_only_in_training():
    mix = ScalarMix(1, dropout=0.5)
    layers = torch.ones(1, 1000)
    assert (mix(layers) == 0).any()
    mix.eval()
    assert torch.equal(mix(layers), torch.ones(1000))


def test_wrong_layer_count():
    with pytest.raises(ValueError, match="expected 3 layers"):
        ScalarMix(3)(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="initial_weights has 2 values"):
        ScalarMix(3, initial_weights=[0.0, 1.0])
