"""The LSTM engine: one interface (:class:`BiLstmStack`), one reference cell, fast paths behind it."""
from .cell import Clips, DistinctInputs, LayerWeights, LstmState, PackingPlan, lstm_cell, reference_layer
from .stack import BiLstmStack

__all__ = [
    "BiLstmStack", "Clips", "DistinctInputs", "LayerWeights", "LstmState", "PackingPlan", "lstm_cell",
    "reference_layer",
]
