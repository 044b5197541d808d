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


def test_sequences_laid_end_to_end_are_normalised_as_if_each_were_alone():
    mix = ScalarMix(3, do_layer_norm=True, initial_weights=[0.3, -0.2, 0.5], initial_gamma=1.5)
    lengths = [4, 0, 1, 7]
    alone = [torch.randn(3, n, 6) * (k + 1) + k for k, n in enumerate(lengths)]
    together = torch.cat(alone, dim=1).requires_grad_()
    mixed = mix(together, lengths=lengths)
    for part, layers in zip(mixed.split(lengths), alone):
        if layers.shape[1]:
            torch.testing.assert_close(part, mix(layers), rtol=1e-6, atol=1e-6)
    upstream = torch.randn_like(mixed)
    (grad_together,) = torch.autograd.grad(mixed, together, upstream)
    for grad, layers, d_mixed in zip(grad_together.split(lengths, dim=1), alone, upstream.split(lengths)):
        if layers.shape[1]:
            layers = layers.clone().requires_grad_()
            (grad_alone,) = torch.autograd.grad(mix(layers), layers, d_mixed)
            torch.testing.assert_close(grad, grad_alone, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="add up to 11"):
        mix(together, lengths=[4, 7])


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
