"""The reference implementations' stateful mode, replayed on an ElmoBiLM for the parity tests."""
from dataclasses import replace
from typing import List, Optional

import torch
from torch import Tensor

from spacy_elmo.models.pytorch.bilm import BiLMOutput, ElmoBiLM, PackedEncoding, select_rows
from spacy_elmo.models.pytorch.host_batch import output_places
from spacy_elmo.models.pytorch.lstm import DistinctInputs, LstmState, PackingPlan


class StatefulBiLM:
    """Replays the reference implementations' stateful mode (for parity checks).

    AllenNLP and bilm-tf carry each batch row's LSTM state into the same row of
    the next batch, which makes a sentence's vectors depend on what came before
    it. :class:`ElmoBiLM` does not do this by default; this wrapper does, with the
    reference's rules: state starts at zero, a larger batch gets zero state in its
    new rows, and rows beyond a smaller batch keep their state.
    """

    def __init__(self, bilm: ElmoBiLM) -> None:
        self.bilm = bilm
        self.state: Optional[List[LstmState]] = None

    def reset(self) -> None:
        self.state = None

    def __call__(self, char_ids: Tensor) -> BiLMOutput:
        batch = char_ids.shape[0]
        if self.state is None:
            options = self.bilm.options
            param = self.bilm.lstm.biases[0]
            self.state = [
                (
                    param.new_zeros((2, batch, options.projection_dim)),
                    param.new_zeros((2, batch, options.lstm_dim)),
                )
                for _ in range(options.n_layers)
            ]
        grow = batch - self.state[0][0].shape[1]
        if grow > 0:
            self.state = [
                (torch.cat([h, h.new_zeros((2, grow, h.shape[2]))], 1),
                 torch.cat([c, c.new_zeros((2, grow, c.shape[2]))], 1))
                for h, c in self.state
            ]
        output, final_state = self._encode(char_ids, [(h[:, :batch], c[:, :batch]) for h, c in self.state])
        self.state = [
            (torch.cat([h_new, h[:, batch:]], 1), torch.cat([c_new, c[:, batch:]], 1))
            for (h_new, c_new), (h, c) in zip(final_state, self.state)
        ]
        return output

    def _encode(self, char_ids: Tensor, state: Optional[List[LstmState]]):
        """The layers, and every sentence's state after its ``</S>`` (forward) and ``<S>`` (backward).

        As :meth:`ElmoBiLM.encode_packed`, but from `state` (per layer, ``(h, c)`` of
        every sentence in batch order; ``None``: zeros) and with the boundary steps the references
        also run: the forward step at ``</S>`` and the backward one at ``<S>``.
        """
        bilm = self.bilm
        batch = bilm.host_batch(char_ids)
        mask = batch.mask
        lengths = mask.sum(dim=1)
        token_vectors = bilm.char_encoder(batch.tokens.to(bilm.device))
        token_index = batch.token_index.long()
        n_steps = lengths + 2
        sorted_order = torch.argsort(n_steps, descending=True, stable=True)
        sorted_steps = n_steps[sorted_order]
        plan = PackingPlan.from_sorted_lengths(sorted_steps.tolist())
        time = torch.arange(len(plan.batch_sizes))
        step_t, sorted_row = (time[:, None] < sorted_steps[None, :]).nonzero(as_tuple=True)
        rows = sorted_order[sorted_row]
        backward_positions = lengths[rows] + 1 - step_t
        index = torch.stack([token_index[rows, step_t], token_index[rows, backward_positions]])
        inputs = torch.stack([select_rows(token_vectors, index[0]), select_rows(token_vectors, index[1])])
        sorted_state = None if state is None else [(h[:, sorted_order], c[:, sorted_order]) for h, c in state]
        layers, final_state = bilm.lstm(inputs, plan, sorted_state, DistinctInputs(token_vectors, index))
        encoding = PackedEncoding(layers, rows, step_t, backward_positions, token_vectors, token_index)
        restore = torch.argsort(sorted_order)
        final_state = [(h[:, restore], c[:, restore]) for h, c in final_state]
        places = output_places(rows.numpy(), torch.stack([step_t, backward_positions]).numpy(), mask.numpy())
        return BiLMOutput(bilm.unpack(encoding, replace(batch, output_index=torch.from_numpy(places))), mask), final_state
