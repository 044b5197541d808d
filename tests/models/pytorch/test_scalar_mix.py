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


def test_penalty_is_l2_of_the_weights():
    mix = ScalarMix(3, initial_weights=[0.5, -1.0, 2.0], l2_penalty=0.1)
    torch.testing.assert_close(mix.penalty(), torch.tensor(0.1 * (0.25 + 1.0 + 4.0)))
    mix.penalty().backward()
    torch.testing.assert_close(mix.weights.grad, 0.2 * torch.tensor([0.5, -1.0, 2.0]))
    assert ScalarMix(3).penalty().item() == 0.0


def test_gamma_is_a_vector_and_scalar_gamma_state_dicts_load():
    mix = ScalarMix(2, initial_gamma=0.5)
    assert mix.gamma.shape == (1,)
    mix.load_state_dict({"weights": torch.tensor([1.0, 2.0]), "gamma": torch.tensor(3.0)})
    assert mix.gamma.shape == (1,) and mix.gamma.item() == 3.0
