"""The reference implementations' stateful mode, replayed on an ElmoBiLM for the parity tests."""
from typing import List, Optional

import torch
from torch import Tensor

from spacy_elmo.models.pytorch.bilm import BiLMOutput, ElmoBiLM
from spacy_elmo.models.pytorch.lstm import LstmState


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

    def _encode(self, char_ids: Tensor, state: List[LstmState]):
        """The layers, and every sentence's state after its ``</S>`` (forward) and ``<S>`` (backward)."""
        mask = (char_ids > 0).any(dim=2)
        lengths = mask.sum(dim=1)
        encoding = self.bilm.encode_packed(char_ids, mask, lengths, initial_state=state, run_boundary_steps=True)
        restore = torch.argsort(encoding.sorted_order)
        final_state = [(h[:, restore], c[:, restore]) for h, c in encoding.final_state]
        return BiLMOutput(self.bilm.unpack(encoding, lengths, char_ids.shape[1]), mask), final_state
