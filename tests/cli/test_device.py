"""Which torch device a --gpu-id names."""
import pytest
import torch

from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.cli.device import select_device


@pytest.mark.parametrize("gpu_id", [None, -1, -2])
def test_no_gpu_id_is_the_cpu(gpu_id):
    assert select_device(gpu_id) == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_a_gpu_without_cuda_is_an_error():
    with pytest.raises(SpacyElmoError, match="--gpu-id 0: CUDA is not available"):
        select_device(0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_ids_name_visible_devices():
    assert select_device(0) == torch.device("cuda", 0)
    with pytest.raises(SpacyElmoError, match="CUDA device\\(s\\) are visible"):
        select_device(torch.cuda.device_count())
