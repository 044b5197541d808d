"""Gradient plumbing: the backprop that sends nothing back, and a listener's grad_factor."""
import numpy
import pytest

from spacy_elmo.errors import SettingsError
from spacy_elmo.models.gradients import check_grad_factor, no_gradient, scale_gradients


@pytest.mark.parametrize("d_outputs", [[numpy.ones((2, 3), dtype="f")], None, []])
def test_no_gradient_sends_an_empty_list_back_whatever_it_receives(d_outputs):
    assert no_gradient(d_outputs) == []


def test_a_factor_of_one_gives_the_same_arrays_in_a_new_list():
    gradients = (numpy.ones((2, 3), dtype="f"), numpy.zeros((1, 3), dtype="f"))
    scaled = scale_gradients(gradients, 1.0)
    assert isinstance(scaled, list) and len(scaled) == 2
    assert all(s is g for s, g in zip(scaled, gradients))


@pytest.mark.parametrize("factor", [0.5, 0.0, -2.0])
def test_each_gradient_is_multiplied_by_the_factor_and_the_inputs_are_left_unchanged(factor):
    gradients = [numpy.arange(6, dtype="f").reshape(2, 3), numpy.full((3, 4, 2), 3.0, dtype="f")]
    originals = [g.copy() for g in gradients]
    scaled = scale_gradients(gradients, factor)
    assert len(scaled) == len(gradients)
    for s, g in zip(scaled, originals):
        assert s.shape == g.shape and s.dtype == g.dtype
        numpy.testing.assert_array_equal(s, g * factor)
    for g, original in zip(gradients, originals):
        numpy.testing.assert_array_equal(g, original)


def test_no_gradients_scale_to_no_gradients():
    assert scale_gradients([], 0.5) == []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "1", True])
def test_a_grad_factor_that_is_not_a_finite_number_is_refused(value):
    with pytest.raises(SettingsError, match="grad_factor must be a finite number"):
        check_grad_factor(value)
    assert check_grad_factor(0.5) == 0.5
