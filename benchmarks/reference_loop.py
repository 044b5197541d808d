"""A baseline with the reference implementation's algorithm, for timing on this machine.

It follows AllenNLP's `_ElmoBiLm` step by step (its package cannot be installed
next to torch 2.x): the character CNN runs on every padded position, each LSTM
layer-direction loops over time in Python with the full ``[x_t, h_{t-1}] W``
product and state clones at every step, the four layer-directions run one after
another, and batches are sorted by length. Same weights and outputs as
:class:`spacy_elmo.ElmoBiLM` (to float rounding); only the speed differs.
"""
from typing import List

import torch
from torch import Tensor

from spacy_elmo.models.pytorch.bilm import BiLMOutput, ElmoBiLM
from spacy_elmo.models.pytorch.char_ids import BOS_IDS, EOS_IDS


def add_boundaries(char_ids: Tensor, lengths: Tensor) -> Tensor:
    batch, max_tokens, width = char_ids.shape
    out = char_ids.new_zeros((batch, max_tokens + 2, width))
    for row, length in enumerate(lengths.tolist()):
        out[row, 0] = torch.tensor(BOS_IDS)
        out[row, 1 : length + 1] = char_ids[row, :length]
        out[row, length + 1] = torch.tensor(EOS_IDS)
    return out


def reference_forward(bilm: ElmoBiLM, char_ids: Tensor) -> Tensor:
    """AllenNLP-style forward; returns layers *Shape:* ``(batch, L + 1, max_tokens, 2P)``."""
    options, lstm = bilm.options, bilm.lstm
    lengths = (char_ids > 0).any(-1).sum(1)
    order = torch.argsort(lengths, descending=True)
    ids = add_boundaries(char_ids[order], lengths[order])
    batch, steps, _ = ids.shape
    encoder = bilm.char_encoder
    chars = torch.nn.functional.embedding(ids.view(-1, 50), encoder.char_embedding).transpose(1, 2)
    features = torch.cat([encoder.activation(conv(chars).amax(2)) for conv in encoder.convolutions], 1)
    width = features.shape[1]
    for weight, bias in zip(encoder.highway_weights, encoder.highway_biases):
        projected = features @ weight + bias
        gate = torch.sigmoid(projected[:, width:])
        features = gate * torch.relu(projected[:, :width]) + (1 - gate) * features
    if encoder.projection is not None:
        features = encoder.projection(features)
    mask = (ids > 0).any(-1)
    tokens = features.view(batch, steps, -1) * mask.unsqueeze(-1)
    hidden, proj = options.lstm_dim, options.projection_dim
    seq_lengths = (lengths[order] + 2).tolist()
    layer_outputs: List[List[Tensor]] = [[], []]
    for direction in range(2):
        layer_input = tokens
        for layer in range(options.n_layers):
            kernel = torch.cat([lstm.input_weights[layer][direction], lstm.hidden_weights[layer][direction]])
            bias = lstm.biases[layer][direction] + lstm.forget_bias
            h = tokens.new_zeros((batch, proj))
            c = tokens.new_zeros((batch, hidden))
            output = tokens.new_zeros((batch, steps, proj))
            for step in range(steps):
                index = step if direction == 0 else steps - 1 - step
                running = sum(1 for n in seq_lengths if n > index)
                h_prev, c_prev = h.clone(), c.clone()  # as AllenNLP: clones every step
                x = layer_input[:running, index]
                gates = torch.cat([x, h_prev[:running]], 1) @ kernel + bias
                i, f, o, j = gates.split(hidden, 1)
                c_new = torch.sigmoid(f) * c_prev[:running] + torch.sigmoid(i) * torch.tanh(j)
                c_new = c_new.clamp(-options.cell_clip, options.cell_clip)
                h_new = (torch.sigmoid(o) * torch.tanh(c_new)) @ lstm.projections[layer][direction]
                h_new = h_new.clamp(-options.proj_clip, options.proj_clip)
                c = c_prev.index_put((torch.arange(running),), c_new)
                h = h_prev.index_put((torch.arange(running),), h_new)
                output[:running, index] = h_new
            if layer > 0 and options.use_skip_connections:
                output = output + layer_input
            layer_outputs[direction].append(output)
            layer_input = output
    layers = [torch.cat([tokens, tokens], -1)] + [
        torch.cat([fwd, bwd], -1) for fwd, bwd in zip(*layer_outputs)
    ]
    stacked = torch.stack(layers, 1)[:, :, 1:-1]
    token_mask = torch.arange(steps - 2)[None, :] < lengths[order][:, None]
    stacked = stacked * token_mask[:, None, :, None]
    return stacked[torch.argsort(order)]


class ReferenceBiLM(torch.nn.Module):
    """:class:`ElmoBiLM`'s interface over :func:`reference_forward`, for `ElmoEmbedder`."""

    def __init__(self, bilm: ElmoBiLM) -> None:
        super().__init__()
        self.bilm = bilm

    def forward(self, char_ids: Tensor) -> BiLMOutput:
        return BiLMOutput(reference_forward(self.bilm, char_ids), (char_ids > 0).any(-1))
