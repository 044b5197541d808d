"""Context-independent token vectors: char embedding -> CNN -> highway -> projection."""
import torch
from torch import Tensor, nn

from .options import BiLMOptions
from .packed_linear import PackedWeights

# Above this many distinct tokens MKL multiplies the highway matrices faster.
_PACKED_MAX_ROWS = 256


class CharacterEncoder(nn.Module):
    """Turns the 50 character ids of each token into one token vector.

    Parameters keep the original layout where it costs nothing (matrices as
    ``(in, out)``), so that converting to and from `weights.hdf5` is exact.
    """

    def __init__(self, options: BiLMOptions) -> None:
        super().__init__()
        self.activation = torch.relu if options.activation == "relu" else torch.tanh
        dim = options.char_embedding_dim
        # Row 0 stays zero: id 0 is a padded token (ids are offset by +1).
        self.char_embedding = nn.Parameter(torch.zeros(options.n_characters, dim))
        self.convolutions = nn.ModuleList(
            nn.Conv1d(dim, count, kernel_size=width) for width, count in options.filters
        )
        width = options.n_filters
        # Highway layer k: columns [transform | carry] of x @ W + b.
        self.highway_weights = nn.ParameterList(
            nn.Parameter(torch.zeros(width, 2 * width)) for _ in range(options.n_highway)
        )
        self.highway_biases = nn.ParameterList(
            nn.Parameter(torch.zeros(2 * width)) for _ in range(options.n_highway)
        )
        self.projection = (
            nn.Linear(width, options.projection_dim) if options.has_char_projection else None
        )
        self._packed = PackedWeights()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Random initialisation for training from scratch (bilm-tf's recipe)."""
        with torch.no_grad():
            nn.init.uniform_(self.char_embedding, -1.0, 1.0)
            self.char_embedding[0].zero_()
            for conv in self.convolutions:
                nn.init.normal_(conv.weight, 0.0, (1.0 / conv.weight.shape[1] / conv.weight.shape[2]) ** 0.5)
                nn.init.zeros_(conv.bias)
            for weight, bias in zip(self.highway_weights, self.highway_biases):
                width = weight.shape[0]
                nn.init.normal_(weight, 0.0, (1.0 / width) ** 0.5)
                bias[:width].zero_()
                bias[width:].fill_(-2.0)  # carry gate starts mostly closed
            if self.projection is not None:
                nn.init.normal_(self.projection.weight, 0.0, (1.0 / self.projection.in_features) ** 0.5)
                nn.init.zeros_(self.projection.bias)

    def forward(self, char_ids: Tensor) -> Tensor:
        """:param char_ids: *Shape:* ``(n_tokens, 50)``, int64.
        :returns: token vectors, *Shape:* ``(n_tokens, projection_dim)``.
        """
        chars = nn.functional.embedding(char_ids, self.char_embedding)
        features = torch.cat([self._max_pooled(chars, conv) for conv in self.convolutions], dim=1)
        width = features.shape[1]
        for k, (weight, bias) in enumerate(zip(self.highway_weights, self.highway_biases)):
            projected = self._packed.matmul(features, weight, (k,), bias=bias, max_rows=_PACKED_MAX_ROWS)
            if projected is None:
                projected = torch.addmm(bias, features, weight)
            transform = torch.relu(projected[:, :width])
            gate = torch.sigmoid(projected[:, width:])
            features = gate * transform + (1.0 - gate) * features
        if self.projection is not None:
            features = self.projection(features)
        return features

    def _max_pooled(self, chars: Tensor, conv: nn.Conv1d) -> Tensor:
        """One filter bank: VALID convolution over the 50 positions, max, activation.

        The convolution runs as one matrix multiply over all character windows,
        1.5x faster on CPU than ``conv1d`` for these shapes. The bias is added
        after the max: rounding is monotone, so the result is the same, and the
        large response matrix is not written twice.

        :param chars: *Shape:* ``(n_tokens, 50, char_embedding_dim)``.
        :returns: *Shape:* ``(n_tokens, n_filters_of_this_width)``.
        """
        n_tokens, n_chars, dim = chars.shape
        width = conv.kernel_size[0]
        windows = chars.unfold(1, width, 1).reshape(n_tokens, n_chars - width + 1, dim * width)
        responses = torch.matmul(windows, conv.weight.reshape(conv.out_channels, -1).T)
        return self.activation(responses.amax(dim=1) + conv.bias)
