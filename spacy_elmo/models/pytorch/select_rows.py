"""Gathering rows of a table with a reproducible gradient."""
import torch
from torch import Tensor


def select_rows(table: Tensor, index: Tensor) -> Tensor:
    """``table[index]``, *Shape:* ``(*index.shape, *table.shape[1:])``.

    Indexing a tensor with an index tensor sums the gradient of a repeated row
    (a word that occurs twice in a batch) in an order that depends on thread
    timing on CPU, so two identical training runs drift apart; ``index_select``
    sums it in index order, bit for bit the same every run.
    """
    rows = torch.index_select(table, 0, index.reshape(-1))
    return rows.view(*index.shape, *table.shape[1:])
