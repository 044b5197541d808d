"""The opt-in int8 path: near the fp32 products and vectors, only where it applies,
and one clear line where the machine cannot run it."""
import pytest
import torch

from spacy_elmo.errors import SettingsError
from spacy_elmo.models.pytorch import int8_linear
from spacy_elmo.models.pytorch.bilm import ElmoBiLM
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.int8_linear import (
    Int8Weights,
    amx_available,
    check_precision,
    choose_kernel,
    int8_available,
    int8_instructions,
)
from spacy_elmo.models.pytorch.options import NAMED_SIZES

needs_int8 = pytest.mark.skipif(not int8_available(), reason="this CPU or torch build has no int8 path")
needs_amx = pytest.mark.skipif(not (int8_available() and amx_available()), reason="this CPU has no AMX tiles")


@pytest.fixture
def vnni_rule(monkeypatch):
    """The kernel choice of a CPU with VNNI and without AMX (fbgemm for the gate
    products from MIN_ROWS rows, whatever the weight's size) on any CPU with an
    int8 path; the activations' range stays this CPU's."""
    choose = int8_linear.choose_kernel

    def as_with_vnni(rows: int, n_in: int, n_out: int, *, cpu: str, gates: bool):
        return choose(rows, n_in, n_out, cpu="vnni", gates=gates)

    monkeypatch.setattr(int8_linear, "choose_kernel", as_with_vnni)


@needs_int8
def test_int8_product_is_near_the_fp32_product(vnni_rule):
    torch.manual_seed(0)
    x, weight = torch.randn(32, 128), torch.randn(128, 2048) * 0.05
    got = Int8Weights().matmul(x, weight, (0,))
    exact = x @ weight
    assert got.shape == exact.shape
    # 8-bit activations with VNNI or AMX, 7-bit without (half the resolution)
    tolerance = 0.04 if int8_instructions() == "avx2" else 0.02
    assert (got - exact).abs().max() < tolerance * exact.abs().max()
    assert not torch.equal(got, exact)  # it is the int8 path


@needs_amx
def test_large_products_take_the_amx_kernel_near_the_fp32_product():
    torch.manual_seed(3)
    x, weight = torch.randn(256, 512), torch.randn(512, 2048) * 0.05
    int8 = Int8Weights()
    got = int8.matmul(x, weight, (0,))
    exact = x @ weight
    assert (got - exact).abs().max() < 0.02 * exact.abs().max()
    assert [key[0] for key in int8._packed] == ["onednn"]


def test_the_kernel_follows_the_cpu_and_the_product_size():
    # VNNI without AMX: the gate products from MIN_ROWS rows, never the projection.
    assert choose_kernel(int8_linear.MIN_ROWS - 1, 128, 2048, cpu="vnni", gates=True) is None
    assert choose_kernel(int8_linear.MIN_ROWS, 128, 2048, cpu="vnni", gates=True) == "fbgemm"
    assert choose_kernel(400, 512, 16384, cpu="vnni", gates=True) == "fbgemm"
    assert choose_kernel(400, 4096, 512, cpu="vnni", gates=False) is None
    # AVX2 without VNNI: english-compact in fp32; the original size's products at any rows.
    assert choose_kernel(400, 128, 2048, cpu="avx2", gates=True) is None
    assert choose_kernel(32, 512, 128, cpu="avx2", gates=False) is None
    assert choose_kernel(1, 512, 16384, cpu="avx2", gates=True) == "fbgemm"
    assert choose_kernel(1, 4096, 512, cpu="avx2", gates=False) == "fbgemm"
    # With AMX: english-compact in fp32; the original size's products at any rows.
    assert choose_kernel(400, 128, 2048, cpu="amx", gates=True) is None
    assert choose_kernel(1, 512, 16384, cpu="amx", gates=True) == "fbgemm"
    assert choose_kernel(int8_linear.AMX_ONEDNN_ROWS, 512, 16384, cpu="amx", gates=True) == "onednn"
    assert choose_kernel(1, 4096, 512, cpu="amx", gates=False) == "fbgemm"
    assert choose_kernel(400, 4096, 512, cpu="amx", gates=False) == "onednn"


def test_the_int8_instructions_follow_the_cpu(monkeypatch):
    def cpu(vnni: bool, amx: bool, capability: str) -> None:
        monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: vnni)
        monkeypatch.setattr(int8_linear, "amx_available", lambda: amx)
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
def test_without_vnni_large_activations_do_not_saturate(monkeypatch):
    # Without VNNI, fbgemm adds pairs of byte products in 16 bits: 8-bit activations
    # against large weights would saturate; 7-bit ones cannot.
    monkeypatch.setattr(int8_linear, "int8_instructions", lambda: "avx2")
    torch.manual_seed(4)
    x = torch.rand(32, 512) * 4.0  # all positive: the largest quantized activations
    weight = torch.randn(512, 2048).sign() * 0.05  # every weight at the int8 extreme
    got = Int8Weights().matmul(x, weight, (0,))
    exact = x @ weight
    assert (got - exact).abs().max() < 0.02 * exact.abs().max()
    assert not torch.equal(got, exact)  # it is the int8 path


@needs_int8
def test_int8_is_not_used_for_few_rows_or_with_gradients(vnni_rule):
    weight = torch.randn(16, 64, requires_grad=True)
    int8 = Int8Weights()
    assert int8.matmul(torch.randn(int8_linear.MIN_ROWS - 1, 16), weight.detach(), (0,)) is None
    assert int8.matmul(torch.randn(32, 16), weight, (0,)) is None  # grad mode, weight needs a gradient


@needs_int8
def test_int8_copies_follow_weight_updates(vnni_rule):
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
def test_int8_bilm_vectors_are_near_fp32_and_the_token_layer_exact(vnni_rule):
    torch.manual_seed(2)
    bilm = ElmoBiLM(NAMED_SIZES["fixture"]).eval()
    sentences = [f"the river bank number {i} was muddy after the rain of last week".split() for i in range(12)]
    exact, int8 = _layers(bilm, sentences, "fp32"), _layers(bilm, sentences, "int8")
    torch.testing.assert_close(int8[:, 0], exact[:, 0], rtol=0, atol=0)
    assert not torch.equal(int8, exact)
    cosine = torch.nn.functional.cosine_similarity(int8[:, 1:], exact[:, 1:], dim=-1)
    assert cosine.min() > 0.99
    bilm.precision = "int8"  # training (gradients) stays fp32
    loss = bilm(batch_to_char_ids(sentences)).layers.sum()
    loss.backward()
    bilm.precision = "fp32"
    assert torch.isclose(loss, bilm(batch_to_char_ids(sentences)).layers.sum())


def test_unknown_or_unsupported_precision_is_one_line(monkeypatch):
    with pytest.raises(SettingsError, match="precision must be one of 'fp32', 'int8', got 'int4'"):
        check_precision("int4")
    monkeypatch.setattr(int8_linear, "int8_available", lambda: False)
    with pytest.raises(SettingsError, match=r"precision 'int8' needs an x86 CPU with AVX2 .* use precision 'fp32'"):
        check_precision("int8")
    check_precision("fp32")
