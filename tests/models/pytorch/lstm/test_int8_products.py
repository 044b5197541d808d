"""The opt-in int8 precision: near the fp32 products and vectors, only where its rule
says, and one clear line where the machine cannot run it."""
import pytest
import torch

from spacy_elmo.errors import SettingsError
from spacy_elmo.models.pytorch.bilm import ElmoBiLM
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.lstm import int8_products, tuning
from spacy_elmo.models.pytorch.lstm.int8_products import (
    Int8Weights,
    amx_available,
    check_precision,
    int8_available,
    int8_instructions,
)
from spacy_elmo.models.pytorch.options import NAMED_SIZES

needs_int8 = pytest.mark.skipif(not int8_available(), reason="this CPU or torch build has no int8 path")
needs_amx = pytest.mark.skipif(not (int8_available() and amx_available()), reason="this CPU has no AMX tiles")


@pytest.fixture
def small_weights_in_int8(monkeypatch):
    """The rule's threshold lowered, so that small test weights go through int8."""
    monkeypatch.setattr(int8_products, "MIN_WEIGHTS", 0)


@needs_int8
def test_int8_product_is_near_the_fp32_product(small_weights_in_int8):
    torch.manual_seed(0)
    x, weight = torch.randn(32, 128), torch.randn(128, 2048) * 0.05
    int8 = Int8Weights()
    assert int8.applies(x, weight)
    got = int8.matmul(x, weight, (0,))
    exact = x @ weight
    assert got.shape == exact.shape
    # 8-bit activations with VNNI or AMX, 7-bit without (half the resolution)
    tolerance = 0.04 if int8_instructions() == "avx2" else 0.02
    assert (got - exact).abs().max() < tolerance * exact.abs().max()
    assert not torch.equal(got, exact)  # it is the int8 path


@needs_amx
def test_with_amx_the_kernel_is_timed_once_and_kept(small_weights_in_int8):
    tuning.forget_decisions()
    torch.manual_seed(3)
    x, weight = torch.randn(256, 512), torch.randn(512, 2048) * 0.05
    int8 = Int8Weights()
    got = int8.matmul(x, weight, (0,))
    assert (got - x @ weight).abs().max() < 0.02 * (x @ weight).abs().max()
    assert {key[0] for key in int8._packed} == {"fbgemm", "onednn"}  # both timed
    assert len([key for key in tuning._decisions if key[0] == "int8_kernel"]) == 1


def test_only_large_weights_without_gradients_take_int8():
    int8 = Int8Weights()
    if int8._cpu is None:
        pytest.skip("this CPU or torch build has no int8 path")
    large = torch.zeros(512, 2048)  # the rule: at least MIN_WEIGHTS elements (1M)
    assert large.numel() == int8_products.MIN_WEIGHTS
    assert int8.applies(torch.zeros(1, 512), large)
    assert not int8.applies(torch.zeros(32, 128), torch.zeros(128, 2048))  # english-compact's gates
    assert not int8.applies(torch.zeros(4, 512), large.requires_grad_())  # a weight being trained
    assert not int8.applies(torch.zeros(4, 512, dtype=torch.float64), large.detach().double())


def test_the_int8_instructions_follow_the_cpu(monkeypatch):
    def cpu(vnni: bool, amx: bool, capability: str) -> None:
        monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: vnni)
        monkeypatch.setattr(int8_products, "amx_available", lambda: amx)
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)

    cpu(vnni=True, amx=True, capability="AVX512")
    assert int8_instructions() == "amx"
    cpu(vnni=True, amx=False, capability="AVX2")  # AVX-VNNI
    assert int8_instructions() == "vnni"
    cpu(vnni=False, amx=False, capability="AVX2")
    assert int8_instructions() == "avx2"
    cpu(vnni=False, amx=False, capability="AVX512")  # AVX-512 without VNNI saturates like AVX2
    assert int8_instructions() == "avx2"
    cpu(vnni=False, amx=False, capability="DEFAULT")
    assert int8_instructions() is None and not int8_available()


@needs_int8
def test_without_vnni_large_activations_do_not_saturate(monkeypatch, small_weights_in_int8):
    # Without VNNI, fbgemm adds pairs of byte products in 16 bits: 8-bit activations
    # against large weights would saturate; 7-bit ones cannot.
    monkeypatch.setattr(int8_products, "int8_instructions", lambda: "avx2")
    torch.manual_seed(4)
    x = torch.rand(32, 512) * 4.0  # all positive: the largest quantized activations
    weight = torch.randn(512, 2048).sign() * 0.05  # every weight at the int8 extreme
    got = Int8Weights().matmul(x, weight, (0,))
    exact = x @ weight
    assert (got - exact).abs().max() < 0.02 * exact.abs().max()
    assert not torch.equal(got, exact)  # it is the int8 path


@needs_int8
def test_int8_copies_follow_weight_updates(small_weights_in_int8):
    torch.manual_seed(1)
    x, weight = torch.randn(16, 32), torch.randn(32, 64)
    int8 = Int8Weights()
    before = int8.matmul(x, weight, (0,))
    weight.mul_(2.0)  # an in-place update: torch's version counter moves
    after = int8.matmul(x, weight, (0,))
    torch.testing.assert_close(after, 2 * before, rtol=0.02, atol=0.05)


def _layers(bilm: ElmoBiLM, sentences, precision: str) -> torch.Tensor:
    bilm.precision = precision
    with torch.inference_mode():
        return bilm(batch_to_char_ids(sentences)).layers


@needs_int8
def test_int8_bilm_vectors_are_near_fp32_and_the_token_layer_exact(small_weights_in_int8):
    torch.manual_seed(2)
    bilm = ElmoBiLM(NAMED_SIZES["tiny"]).eval()
    sentences = [f"the river bank number {i} was muddy after the rain of last week".split() for i in range(12)]
    exact, int8 = _layers(bilm, sentences, "fp32"), _layers(bilm, sentences, "int8")
    torch.testing.assert_close(int8[:, 0], exact[:, 0], rtol=0, atol=0)
    assert not torch.equal(int8, exact)
    cosine = torch.nn.functional.cosine_similarity(int8[:, 1:], exact[:, 1:], dim=-1)
    assert cosine.min() > 0.99
    # training (gradients) stays fp32
    bilm.precision = "int8"
    loss = bilm(batch_to_char_ids(sentences)).layers.sum()
    loss.backward()
    bilm.precision = "fp32"
    assert torch.isclose(loss, bilm(batch_to_char_ids(sentences)).layers.sum())


def test_unknown_or_unsupported_precision_is_one_line(monkeypatch):
    with pytest.raises(SettingsError, match="precision must be one of 'fp32', 'int8', got 'int4'"):
        check_precision("int4")
    monkeypatch.setattr(int8_products, "int8_available", lambda: False)
    with pytest.raises(SettingsError, match=r"precision 'int8' needs an x86 CPU with AVX2 .* use precision 'fp32'"):
        check_precision("int8")
    check_precision("fp32")
