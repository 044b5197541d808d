"""ELMo (Peters et al. 2018) for spaCy: the biLM in PyTorch, original weights, pipeline components."""
from .about import __version__
from .models.loaders import load_bilm
from .models.pytorch.bilm import BiLMOutput, ElmoBiLM
from .models.pytorch.char_ids import batch_to_char_ids
from .models.pytorch.elmoformanylangs_format import load as load_elmoformanylangs
from .models.pytorch.embedder import ElmoEmbedder
from .models.pytorch.options import NAMED_SIZES, BiLMOptions
from .models.pytorch.original_format import save_bilm
from .models.pytorch.scalar_mix import ScalarMix

__all__ = [
    "__version__", "NAMED_SIZES", "BiLMOptions", "BiLMOutput", "ElmoBiLM", "ElmoEmbedder", "ScalarMix",
    "batch_to_char_ids", "load_bilm", "load_elmoformanylangs", "save_bilm",
]
