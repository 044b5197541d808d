"""Full and sampled softmax, the log-uniform sampler, and the softmax file."""
import numpy
import pytest
import torch
from torch import nn

from spacy_elmo.errors import WeightsError
from spacy_elmo.pretraining import softmax as softmax_module
from spacy_elmo.pretraining.softmax import (
    LMSoftmax, LogUniformSampler, SampledCandidates, full_softmax_nll, load_softmax, save_softmax,
)


def _softmax(vocab_size=50, dim=8, seed=0):
    torch.manual_seed(seed)
    softmax = LMSoftmax(vocab_size, dim)
    with torch.no_grad():
        softmax.bias.normal_()
    return softmax


class _NoCorrection(SampledCandidates):
    def log_expected_count(self, ids):
        return torch.zeros(ids.shape)


def test_sampled_softmax_over_every_class_is_the_full_softmax():
    softmax = _softmax()
    hidden, targets = torch.randn(12, 8), torch.randint(0, 50, (12,))
    everything = _NoCorrection(torch.arange(50), 50, 50)
    full = softmax.nll(hidden, targets)
    torch.testing.assert_close(softmax.nll(hidden, targets, everything), full)
    expected = -torch.log_softmax(hidden @ softmax.weight.T + softmax.bias, dim=1)[torch.arange(12), targets]
    torch.testing.assert_close(full, expected.detach())


def test_sampled_softmax_corrects_logits_by_expected_counts():
    softmax = _softmax()
    hidden, targets = torch.randn(12, 8), torch.randint(0, 50, (12,))
    candidates = SampledCandidates(torch.tensor([0, 3, 7, 9, 20, 33]), 9, 50)
    got = softmax.nll(hidden, targets, candidates)
    logits = (hidden @ softmax.weight.T + softmax.bias).detach()
    corrected = logits - candidates.log_expected_count(torch.arange(50))
    for row, target in enumerate(targets.tolist()):
        classes = [target] + [c for c in candidates.ids.tolist() if c != target]  # accidental hits removed
        expected = -torch.log_softmax(corrected[row, classes], dim=0)[0]
        assert got[row].item() == pytest.approx(expected.item(), rel=1e-5)


def test_chunked_full_softmax_and_gradients():
    softmax = _softmax()
    hidden, targets = torch.randn(37, 8, requires_grad=True), torch.randint(0, 50, (37,))
    torch.testing.assert_close(softmax.nll(hidden, targets, chunk_rows=5), softmax.nll(hidden, targets))
    softmax.nll(hidden, targets, SampledCandidates(torch.tensor([1, 2, 3]), 4, 50)).sum().backward()
    assert hidden.grad is not None and torch.isfinite(hidden.grad).all()
    touched = softmax.weight.grad.abs().sum(dim=1) > 0
    assert set(touched.nonzero().flatten().tolist()) <= {1, 2, 3} | set(targets.tolist())


@pytest.fixture(params=["saved", "recomputed"])
def probabilities(request, monkeypatch):
    """The backward reads the probabilities the forward saved, or recomputes them."""
    if request.param == "recomputed":
        monkeypatch.setattr(softmax_module, "_SAVED_PROBABILITIES_MAX_BYTES", 0)
    return request.param


@pytest.mark.parametrize("chunk_rows", [1, 7, 100])
def test_full_softmax_equals_cross_entropy_with_gradients(chunk_rows, probabilities):
    """The chunked NLL and its hand-written backward against autograd's cross entropy (float64)."""
    torch.manual_seed(0)
    weight, bias = torch.randn(60, 8, dtype=torch.float64), torch.randn(60, dtype=torch.float64)
    hidden = torch.randn(37, 8, dtype=torch.float64)
    targets, upstream = torch.randint(0, 60, (37,)), torch.randn(37, dtype=torch.float64)
    inputs = [x.clone().requires_grad_() for x in (hidden, weight, bias)]
    reference = nn.functional.cross_entropy(nn.functional.linear(*inputs), targets, reduction="none")
    expected = torch.autograd.grad((reference * upstream).sum(), inputs)
    got = full_softmax_nll(inputs[0], targets, inputs[1], inputs[2], chunk_rows=chunk_rows)
    torch.testing.assert_close(got, reference, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad((got * upstream).sum(), inputs), expected):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(
        lambda h, w, b: full_softmax_nll(h, targets[:6], w, b, chunk_rows=4),
        tuple(x.detach()[:6].requires_grad_() if i == 0 else x.detach().requires_grad_() for i, x in enumerate(inputs)),
    )


def test_log_uniform_sampler_matches_its_expected_counts():
    vocab_size, n_samples, trials = 1000, 40, 3000
    sampler = LogUniformSampler(vocab_size, n_samples, seed=0)
    hits = numpy.zeros(vocab_size)
    expected = numpy.zeros(vocab_size)
    for _ in range(trials):
        candidates = sampler.sample()
        ids = candidates.ids.numpy()
        assert len(set(ids.tolist())) == n_samples and ids.min() >= 0 and ids.max() < vocab_size
        assert candidates.num_tries >= n_samples
        hits[ids] += 1
        expected += numpy.exp(candidates.log_expected_count(torch.arange(vocab_size)).numpy())
    for k in (0, 1, 5, 50):
        assert hits[k] / trials == pytest.approx(expected[k] / trials, abs=0.03), k
    assert hits[:10].sum() > hits[-500:].sum()  # frequent (low) ids are drawn far more often


def test_sampler_state_round_trip_and_bad_sizes():
    sampler = LogUniformSampler(100, 10, seed=5)
    sampler.sample()
    state = sampler.state_dict()
    expected = [sampler.sample().ids.tolist() for _ in range(3)]
    again = LogUniformSampler(100, 10, seed=99)
    again.load_state_dict(state)
    assert [again.sample().ids.tolist() for _ in range(3)] == expected
    with pytest.raises(ValueError, match="between 1 and the vocabulary size minus one"):
        LogUniformSampler(10, 10)


def test_softmax_file_round_trip(tmp_path):
    softmax = _softmax()
    save_softmax(softmax, tmp_path / "softmax.hdf5")
    again = load_softmax(tmp_path / "softmax.hdf5", vocab_size=50, dim=8)
    assert torch.equal(again.weight, softmax.weight) and torch.equal(again.bias, softmax.bias)
    with pytest.raises(WeightsError, match=r"'softmax/W' has shape \(50, 8\), but for a vocabulary of 51 words .* should be \(51, 8\)"):
        load_softmax(tmp_path / "softmax.hdf5", vocab_size=51, dim=8)
    (tmp_path / "bad.hdf5").write_bytes(b"junk")
    with pytest.raises(WeightsError, match="not a readable HDF5 file"):
        load_softmax(tmp_path / "bad.hdf5", vocab_size=50, dim=8)


def test_chunked_sampled_softmax_gradients_match_autograd(probabilities):
    """The sampled softmax's own backward gives autograd's gradients of the plain formula."""
    torch.manual_seed(0)
    softmax = _softmax()
    hidden = torch.randn(12, 8, requires_grad=True)
    targets = torch.tensor([0, 3, 5, 7, 9, 11, 20, 33, 40, 3, 0, 49])  # hits on 0, 3, 7, 9, 20, 33
    candidates = SampledCandidates(torch.tensor([0, 3, 7, 9, 20, 33]), 9, 50)
    weights = torch.rand(12)
    (softmax.nll(hidden, targets, candidates, chunk_rows=5) * weights).sum().backward()
    got = [hidden.grad.clone(), softmax.weight.grad.clone(), softmax.bias.grad.clone()]
    hidden.grad = softmax.weight.grad = softmax.bias.grad = None
    log_q = candidates.log_expected_count(torch.arange(50))
    true_logits = (hidden * softmax.weight[targets]).sum(1) + softmax.bias[targets] - log_q[targets]
    sampled = hidden @ softmax.weight[candidates.ids].T + softmax.bias[candidates.ids] - log_q[candidates.ids]
    sampled = sampled.masked_fill(targets[:, None] == candidates.ids[None, :], float("-inf"))
    plain = torch.logsumexp(torch.cat([true_logits[:, None], sampled], 1), 1) - true_logits
    (plain * weights).sum().backward()
    for mine, reference in zip(got, [hidden.grad, softmax.weight.grad, softmax.bias.grad]):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-6)


def test_default_chunks_fit_a_cpu_cache_and_fill_a_gpu():
    assert softmax_module.default_chunk_rows(50_000, torch.device("cpu")) == 20
    assert softmax_module.default_chunk_rows(4096, torch.device("cpu")) == 256
    assert softmax_module.default_chunk_rows(50_000, torch.device("cuda", 0)) == (1 << 27) // 50_000
    assert softmax_module.default_chunk_rows(10**9, torch.device("cpu")) == 16
