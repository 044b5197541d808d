"""The Thinc ScalarMix layer: exact values, gradients, the L2 penalty, sizes."""
import numpy
import pytest
from thinc.api import SGD

from spacy_elmo.errors import SettingsError
from spacy_elmo.models.scalar_mix_layer import build_scalar_mix_v1, get_mix, mix_parameters, set_mix_dims

RNG = numpy.random.default_rng(0)


def _layers(*lengths, n_layers=3, width=4):
    return [RNG.normal(size=(n_layers, n, width)).astype("f") for n in lengths]


def _softmax(s):
    e = numpy.exp(s - max(s))
    return e / e.sum()


def test_mix_is_gamma_times_softmax_weighted_sum():
    s, gamma = [0.5, -1.0, 2.0], 1.7
    mix = build_scalar_mix_v1(initial_weights=s, initial_gamma=gamma)
    X = _layers(2, 0, 5)
    mix.initialize(X=X)
    assert (mix.get_dim("nL"), mix.get_dim("nO")) == (3, 4)
    Y = mix.predict(X)
    assert [y.shape for y in Y] == [(2, 4), (0, 4), (5, 4)]
    for x, y in zip(X, Y):
        expected = gamma * numpy.tensordot(_softmax(numpy.array(s)), x, axes=1)
        numpy.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    weights, got_gamma = mix_parameters(mix)
    numpy.testing.assert_allclose(weights, _softmax(numpy.array(s)), rtol=1e-6)
    assert got_gamma == pytest.approx(gamma)


def test_gradients_of_inputs_and_parameters():
    s, gamma = numpy.array([0.2, 0.1, -0.3]), 2.0
    mix = build_scalar_mix_v1(initial_weights=list(s), initial_gamma=gamma)
    X = _layers(3, 2)
    mix.initialize(X=X)
    Y, backprop = mix(X, is_train=True)
    dY = [numpy.ones_like(y) for y in Y]
    dX = backprop(dY)
    w = _softmax(s)
    for x, d in zip(X, dX):
        assert d.shape == x.shape
        numpy.testing.assert_allclose(d, gamma * w[:, None, None] * numpy.ones_like(x), rtol=1e-6)
    torch_mix = get_mix(mix)
    # d/dgamma sum(Y) = sum over tokens of the unscaled mix
    unscaled = sum(numpy.tensordot(w, x, axes=1).sum() for x in X)
    assert float(torch_mix.gamma.grad) == pytest.approx(unscaled, rel=1e-5)
    layer_sums = sum(x.sum(axis=(1, 2)) for x in X)
    expected_s_grad = gamma * w * (layer_sums - (w * layer_sums).sum())
    numpy.testing.assert_allclose(torch_mix.weights.grad.numpy(), expected_s_grad, rtol=1e-4, atol=1e-6)


def test_l2_penalty_adds_its_gradient_once_per_batch():
    s = [0.4, -0.2, 0.1]
    X = _layers(3, 4)
    gradients = []
    for penalty in (0.25, 0.0):
        mix = build_scalar_mix_v1(initial_weights=s, l2_penalty=penalty)
        mix.initialize(X=X)
        Y, backprop = mix(X, is_train=True)
        backprop([numpy.ones_like(y) for y in Y])
        gradients.append(get_mix(mix).weights.grad.numpy().copy())
    # d(0.25 * sum(s^2)) / ds = 0.5 * s, added to the task's gradient.
    numpy.testing.assert_allclose(gradients[0] - gradients[1], 0.5 * numpy.array(s), rtol=1e-5, atol=1e-7)


def test_thinc_optimizers_update_weights_and_gamma():
    mix = build_scalar_mix_v1()
    X = _layers(4)
    mix.initialize(X=X)
    Y, backprop = mix(X, is_train=True)
    backprop([numpy.ones_like(y) for y in Y])
    mix.finish_update(SGD(0.1))
    weights, gamma = mix_parameters(mix)
    assert gamma != 1.0 and not numpy.allclose(weights, 1 / 3)
    assert get_mix(mix).gamma.shape == (1,)  # as AllenNLP's


def test_untrainable_mix_keeps_its_weights():
    mix = build_scalar_mix_v1(trainable=False, initial_weights=[1.0, 0.0, 0.0])
    X = _layers(4)
    mix.initialize(X=X)
    Y, backprop = mix(X, is_train=True)
    backprop([numpy.ones_like(y) for y in Y])
    mix.finish_update(SGD(0.1))
    assert mix_parameters(mix)[1] == 1.0


def test_layer_norm_statistics_are_per_doc():
    mix = build_scalar_mix_v1(do_layer_norm=True)
    X = _layers(3, 6)
    mix.initialize(X=X)
    alone = mix.predict(X[:1])[0]
    together = mix.predict(X)[0]
    numpy.testing.assert_allclose(alone, together, rtol=1e-6)
    assert abs(float(alone.mean())) < 1e-5  # normalised layers, equal weights
    Y, backprop = mix(X, is_train=True)
    assert [d.shape for d in backprop([numpy.ones_like(y) for y in Y])] == [x.shape for x in X]


def test_dropout_only_in_training():
    mix = build_scalar_mix_v1(dropout=0.5)
    X = _layers(50, width=8)
    mix.initialize(X=X)
    numpy.testing.assert_allclose(mix.predict(X)[0], mix.predict(X)[0])
    Y, _ = mix(X, is_train=True)
    assert (Y[0] == 0).mean() > 0.2


def test_sizes_from_config_or_biLM():
    with pytest.raises(SettingsError, match=r"initial_weights \[0.0, 0.0, 0.0\] has 3 values, but mixer.n_layers is 4"):
        build_scalar_mix_v1(n_layers=4, initial_weights=[0.0, 0.0, 0.0])
    unsized = build_scalar_mix_v1()
    with pytest.raises(SettingsError, match="how many biLM layers"):
        unsized.initialize()
    fixed = build_scalar_mix_v1(n_layers=4)
    with pytest.raises(SettingsError, match="built for 4 layers, but its biLM gives 3"):
        set_mix_dims(fixed, 3, 32)
    set_mix_dims(unsized, 3, 32)
    unsized.initialize()
    assert get_mix(unsized).n_layers == 3
    with pytest.raises(SettingsError, match="l2_penalty"):
        build_scalar_mix_v1(l2_penalty=-1.0)


def test_initial_weights_of_the_wrong_length_for_the_biLM_name_the_setting():
    mix = build_scalar_mix_v1(initial_weights=[0.0, 1.0])  # n_layers null: it follows the biLM
    with pytest.raises(SettingsError) as error:
        mix.initialize(X=_layers(2))
    assert str(error.value) == (
        "mixer.initial_weights [0.0, 1.0] has 2 values, but the biLM gives 3 layers "
        "(one weight per layer; null: equal weights)"
    )


def test_serialization_before_and_after_initialize():
    fresh = build_scalar_mix_v1()
    fresh.from_bytes(build_scalar_mix_v1().to_bytes())
    assert get_mix(fresh) is None
    trained = build_scalar_mix_v1(initial_weights=[0.3, 0.2, 0.1], initial_gamma=0.5, dropout=0.1)
    X = _layers(3)
    trained.initialize(X=X)
    loaded = build_scalar_mix_v1().from_bytes(trained.to_bytes())
    numpy.testing.assert_array_equal(loaded.predict(X)[0], trained.predict(X)[0])
    assert get_mix(loaded).dropout.p == 0.1
    assert loaded.get_dim("nL") == 3


@pytest.mark.parametrize("setting,value,message", [
    ("initial_gamma", float("nan"), "mixer.initial_gamma must be a finite number, got nan"),
    ("initial_gamma", float("inf"), "mixer.initial_gamma must be a finite number, got inf"),
    ("initial_weights", [0.0, float("nan"), 0.0], "mixer.initial_weights must be finite numbers, got nan"),
    ("l2_penalty", float("nan"), "mixer.l2_penalty must be a finite number, got nan"),
    ("dropout", 2.0, r"mixer.dropout must be in \[0, 1\), got 2.0"),
    ("dropout", -0.1, r"mixer.dropout must be in \[0, 1\), got -0.1"),
    ("n_layers", 0, "mixer.n_layers must be null or a positive number of layers, got 0"),
])
def test_settings_that_would_train_nan_or_fail_in_torch_are_refused_when_built(setting, value, message):
    with pytest.raises(SettingsError, match=message):
        build_scalar_mix_v1(**{setting: value})
