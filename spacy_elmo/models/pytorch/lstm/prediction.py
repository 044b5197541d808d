"""Prediction (no gradients): the reference cell's steps with faster products.

The first layer's input product runs once per distinct token of the batch where its weights have at least
:data:`MIN_INPUT_WEIGHTS_FOR_TABLE` elements and the batch has fewer distinct tokens than rows; smaller products cost
less than the gather.
"""
from typing import Iterator, Optional, Tuple

import torch
from torch import Tensor

from ..prepacked_linear import PrepackedWeights
from .cell import Clips, DistinctInputs, LayerWeights, LstmState, PackingPlan, Product, affine, run_steps
from .int8_products import Int8Weights

#: Rows of the input product computed in one matrix multiply: bounds the memory of
#: the gate inputs on long inputs while keeping the product large.
INPUT_CHUNK_ROWS = 2048
#: The first layer's input product over distinct tokens from this many weights (``P x 4H``).
MIN_INPUT_WEIGHTS_FOR_TABLE = 512 * 1024


class FastProducts:
    """The products of prediction, through prepacked or int8 copies of the weights.

    The copies are kept per weight (``key``) and rebuilt when the weight changes;
    :meth:`clear` drops them (after updates outside torch).
    """

    def __init__(self) -> None:
        self._prepacked = PrepackedWeights()
        self._int8 = Int8Weights()

    def clear(self) -> None:
        self._prepacked.clear()
        self._int8.clear()

    def __call__(self, add: Optional[Tensor], x: Tensor, weight: Tensor, key: Tuple[object, ...], precision: str) -> Tensor:
        """``add + x @ weight`` per direction, as :data:`~.cell.Product`; `key` names the weight."""
        if precision == "int8" and self._int8.applies(x, weight):
            products = [self._int8.matmul(x[d], weight[d], (*key, d)) for d in range(x.shape[0])]
            product = products[0].unsqueeze(0) if len(products) == 1 else torch.stack(products)
            return product if add is None else product.add_(add)
        if x.shape[0] == 1:
            is_bias = add is not None and add.shape[1] == 1
            product = self._prepacked.matmul(x[0], weight[0], key, bias=add[0, 0] if is_bias else None)
            if product is not None:
                product = product.unsqueeze(0)
                return product if add is None or is_bias else add + product
        return affine(add, x, weight)

    def bound(self, key: Tuple[object, ...], weights: LayerWeights, precision: str) -> Product:
        """The :data:`~.cell.Product` for one layer's recurrent and projection weights."""
        def product(add: Optional[Tensor], x: Tensor, weight: Tensor) -> Tensor:
            which = "hidden" if weight is weights.hidden else "projection"
            return self(add, x, weight, (*key, which), precision)

        return product


def prediction_layer(
    products: FastProducts,
    key: Tuple[object, ...],
    inputs: Tensor,
    plan: PackingPlan,
    weights: LayerWeights,
    clips: Clips,
    state: Optional[LstmState] = None,
    distinct: Optional[DistinctInputs] = None,
    precision: str = "fp32",
) -> Tuple[Tensor, LstmState]:
    """One layer for the ``k`` directions of `weights`, as :func:`~.cell.reference_layer` computes it.

    :param inputs: *Shape:* ``(k, n_rows, P)``.
    :param key: names this layer's weights (layer and first direction) for `products`' copies.
    :param distinct: the first layer's `inputs` as rows of a table, or ``None``.
    """
    if distinct is not None and not uses_distinct_table(inputs, weights, distinct):
        distinct = None
    gate_inputs = (
        _table_gate_inputs(products, key, inputs, plan, weights, distinct, precision) if distinct is not None
        else _chunked_gate_inputs(products, key, inputs, plan, weights, precision)
    )
    return run_steps(gate_inputs, plan, weights, clips, state, products.bound(key, weights, precision))


def uses_distinct_table(inputs: Tensor, weights: LayerWeights, distinct: DistinctInputs) -> bool:
    """The rule of the module's docstring, on a CPU."""
    n_distinct = distinct.vectors.shape[0]
    return (
        inputs.device.type == "cpu"
        and weights.input[0].numel() >= MIN_INPUT_WEIGHTS_FOR_TABLE
        and n_distinct < inputs.shape[1]
        and n_distinct <= INPUT_CHUNK_ROWS
    )


def _table_gate_inputs(
    products: FastProducts, key: Tuple[object, ...], inputs: Tensor, plan: PackingPlan, weights: LayerWeights,
    distinct: DistinctInputs, precision: str,
) -> Iterator[Tensor]:
    """Each step's gate inputs gathered from the product over the distinct tokens."""
    k, n_distinct = inputs.shape[0], distinct.vectors.shape[0]
    first = key[1]
    table = products(
        weights.bias.unsqueeze(1), distinct.vectors.expand(k, -1, -1), weights.input, (*key, "input"), precision
    ).flatten(0, 1)  # (k * n_distinct, 4H): direction d's rows from d * n_distinct
    rows = distinct.index[first : first + k] + n_distinct * torch.arange(k, device=inputs.device).unsqueeze(1)
    # Gathered per step: a chunk of gathered rows would be a fresh allocation of
    # up to k x 2048 x 4H floats, whose page faults cost more.
    return (
        torch.index_select(table, 0, rows[:, offset : offset + n].flatten()).view(k, n, -1)
        for n, offset in zip(plan.batch_sizes, plan.offsets)
    )


def _chunked_gate_inputs(
    products: FastProducts, key: Tuple[object, ...], inputs: Tensor, plan: PackingPlan, weights: LayerWeights,
    precision: str,
) -> Iterator[Tensor]:
    """Each step's gate inputs from the input product over chunks of `inputs`."""
    bias = weights.bias.unsqueeze(1)
    t = 0
    while t < len(plan.batch_sizes):
        start, end, n_steps = _chunk(plan, t)
        chunk = products(bias, inputs[:, start:end], weights.input, (*key, "input"), precision)
        yield from chunk.split(plan.batch_sizes[t : t + n_steps], dim=1)
        t += n_steps


def _chunk(plan: PackingPlan, first_step: int) -> Tuple[int, int, int]:
    """Start row, end row and number of steps of the input-product chunk at `first_step`."""
    start = plan.offsets[first_step]
    end, n_steps = start, 0
    for n in plan.batch_sizes[first_step:]:
        if end > start and end - start + n > INPUT_CHUNK_ROWS:
            break
        end += n
        n_steps += 1
    return start, end, n_steps

