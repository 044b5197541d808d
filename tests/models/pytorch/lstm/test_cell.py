"""The reference LSTM against the equations in its docstring, written out one sequence at a time."""
import numpy
import torch

from spacy_elmo.models.pytorch.lstm.cell import Clips, LayerWeights, PackingPlan, reference_layer

H, P = 5, 3


def _sigmoid(x):
    return 1.0 / (1.0 + numpy.exp(-x))


def _one_sequence(x, w, clips):
    """TensorFlow's LSTMCell with projection over one sequence `x` (T, P), float64, gates i, f, o, j."""
    w_in, w_h, b, w_p = (t.double().numpy() for t in (w.input[0], w.hidden[0], w.bias[0], w.projection[0]))
    h, c, outputs = numpy.zeros(P), numpy.zeros(H), []
    for x_t in x:
        z = x_t @ w_in + h @ w_h + b
        i, f, o, j = _sigmoid(z[:H]), _sigmoid(z[H : 2 * H]), _sigmoid(z[2 * H : 3 * H]), numpy.tanh(z[3 * H :])
        c = numpy.clip(f * c + i * j, -clips.cell, clips.cell)
        h = numpy.clip((o * numpy.tanh(c)) @ w_p, -clips.projection, clips.projection)
        outputs.append(h)
    return numpy.array(outputs), h, c


def test_the_reference_layer_is_the_papers_cell_over_packed_sequences():
    generator = torch.Generator().manual_seed(0)
    weights = LayerWeights(*(torch.randn(*shape, generator=generator) for shape in ((1, P, 4 * H), (1, P, 4 * H), (1, 4 * H), (1, H, P))))
    clips = Clips(cell=1.5, projection=0.8)  # small enough that both clip some values
    lengths = [4, 4, 2, 1]  # longest first, as packing needs
    sequences = [torch.randn(n, P, generator=generator) for n in lengths]
    plan = PackingPlan.from_sorted_lengths(lengths)
    assert plan.batch_sizes == (4, 3, 2, 2) and plan.offsets == (0, 4, 7, 9) and plan.n_rows == 11
    packed = torch.cat([torch.stack([s[t] for s in sequences if len(s) > t]) for t in range(4)]).unsqueeze(0)
    outputs, (final_h, final_c) = reference_layer(packed, plan, weights, clips)
    clipped = 0
    for k, sequence in enumerate(sequences):
        expected, h, c = _one_sequence(sequence.double().numpy(), weights, clips)
        rows = [plan.offsets[t] + k for t in range(len(sequence))]
        numpy.testing.assert_allclose(outputs[0, rows].numpy(), expected, rtol=1e-5, atol=1e-6)
        numpy.testing.assert_allclose(final_h[0, k].numpy(), h, rtol=1e-5, atol=1e-6)
        numpy.testing.assert_allclose(final_c[0, k].numpy(), c, rtol=1e-5, atol=1e-6)
        clipped += int((abs(expected) >= clips.projection - 1e-9).sum())
    assert clipped > 0


def test_a_plan_of_no_sequences_has_no_steps():
    plan = PackingPlan.from_sorted_lengths([])
    assert plan.batch_sizes == () and plan.n_rows == 0
