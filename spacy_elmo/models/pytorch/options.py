"""The biLM hyper-parameters, as stored in bilm-tf/AllenNLP `options.json`."""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ...errors import OptionsError


@dataclass(frozen=True)
class BiLMOptions:
    """Sizes of the character CNN and the biLSTM.

    The names follow `options.json`; `extra` keeps every key this class does not
    interpret (bilm-tf training settings, for example) so that a saved file
    round-trips unchanged.
    """

    char_embedding_dim: int
    filters: Tuple[Tuple[int, int], ...]
    n_highway: int
    activation: str
    n_characters: int
    max_characters_per_token: int
    lstm_dim: int
    projection_dim: int
    n_layers: int
    cell_clip: Optional[float]
    proj_clip: Optional[float]
    use_skip_connections: bool
    extra: Dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def n_filters(self) -> int:
        """Width of the character CNN output (sum of filter counts)."""
        return sum(count for _, count in self.filters)

    @property
    def has_char_projection(self) -> bool:
        """bilm-tf projects the CNN output only when its width differs."""
        return self.n_filters != self.projection_dim

    @property
    def n_output_layers(self) -> int:
        """L + 1: the token layer plus one per LSTM layer."""
        return self.n_layers + 1

    @property
    def output_dim(self) -> int:
        """Width of every output layer: forward and backward halves."""
        return 2 * self.projection_dim

    @classmethod
    def from_dict(cls, options: Dict[str, Any], *, source: str = "options") -> "BiLMOptions":
        """Read the `options.json` layout; a missing or invalid value raises
        `OptionsError` naming `source` and the key (``lstm.dim``)."""
        get = _OptionReader(options, source)
        activation = get("char_cnn.activation", str)
        if activation not in ("relu", "tanh"):
            raise OptionsError(f"{source}: char_cnn.activation must be 'relu' or 'tanh', got {activation!r}")
        max_chars = get("char_cnn.max_characters_per_token", int, default=50)
        if max_chars != 50:
            raise OptionsError(
                f"{source}: char_cnn.max_characters_per_token must be 50 (the "
                f"character-id layout), got {max_chars}"
            )
        raw_filters = get("char_cnn.filters", list)
        try:
            filters = tuple((int(width), int(count)) for width, count in raw_filters)
        except (TypeError, ValueError):
            filters = ()
        if not filters or any(width < 1 or width > max_chars or count < 1 for width, count in filters):
            raise OptionsError(
                f"{source}: invalid char_cnn.filters {raw_filters!r} (expected [[width, count], ...] "
                f"with 1 <= width <= {max_chars} and count >= 1)"
            )
        lstm_dim = get("lstm.dim", int, minimum=1)
        known = {
            "lstm": {"dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections"},
            "char_cnn": {"embedding", "filters", "n_highway", "activation", "n_characters", "max_characters_per_token"},
        }
        extra = {k: v for k, v in options.items() if k not in known}
        for section, keys in known.items():
            rest = {k: v for k, v in options[section].items() if k not in keys}
            if rest:
                extra[section] = rest
        return cls(
            char_embedding_dim=get("char_cnn.embedding.dim", int, minimum=1),
            filters=filters,
            n_highway=get("char_cnn.n_highway", int, minimum=0),
            activation=activation,
            n_characters=get("char_cnn.n_characters", int, default=262, minimum=2),
            max_characters_per_token=max_chars,
            lstm_dim=lstm_dim,
            projection_dim=get("lstm.projection_dim", int, default=lstm_dim, minimum=1),
            n_layers=get("lstm.n_layers", int, minimum=1),
            cell_clip=get("lstm.cell_clip", float, default=None, minimum=0),
            proj_clip=get("lstm.proj_clip", float, default=None, minimum=0),
            use_skip_connections=get("lstm.use_skip_connections", bool, default=False),
            extra=extra,
        )

    def to_dict(self) -> Dict[str, Any]:
        """The `options.json` layout, including the keys kept in `extra`."""
        options: Dict[str, Any] = {
            k: v for k, v in self.extra.items() if k not in ("lstm", "char_cnn")
        }
        options["lstm"] = {
            "cell_clip": self.cell_clip,
            "use_skip_connections": self.use_skip_connections,
            "n_layers": self.n_layers,
            "proj_clip": self.proj_clip,
            "projection_dim": self.projection_dim,
            "dim": self.lstm_dim,
            **self.extra.get("lstm", {}),
        }
        options["char_cnn"] = {
            "embedding": {"dim": self.char_embedding_dim},
            "filters": [list(f) for f in self.filters],
            "n_highway": self.n_highway,
            "n_characters": self.n_characters,
            "max_characters_per_token": self.max_characters_per_token,
            "activation": self.activation,
            **self.extra.get("char_cnn", {}),
        }
        return options


_MISSING = object()


class _OptionReader:
    """Reads dotted keys (``lstm.dim``) of an options dict with type and range checks."""

    def __init__(self, options: Dict[str, Any], source: str) -> None:
        self.options = options
        self.source = source

    def __call__(self, key: str, kind: type, *, default: Any = _MISSING, minimum: Optional[float] = None) -> Any:
        value: Any = self.options
        parts = key.split(".")
        for depth, part in enumerate(parts):
            if not isinstance(value, dict):
                where = ".".join(parts[:depth]) or "the options"
                raise OptionsError(f"{self.source}: {where} must be an object, got {value!r}")
            value = value.get(part, _MISSING)
            if value is _MISSING:
                break
        if value is _MISSING or (value is None and default is None):
            if default is _MISSING:
                raise OptionsError(f"{self.source}: missing option {key}")
            return default
        if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise OptionsError(f"{self.source}: {key} must be a number, got {value!r}")
        if kind is int and value != int(value):
            raise OptionsError(f"{self.source}: {key} must be a whole number, got {value!r}")
        if kind in (str, list, bool) and not isinstance(value, kind):
            raise OptionsError(f"{self.source}: {key} must be a {kind.__name__}, got {value!r}")
        value = kind(value)
        if minimum is not None and value < minimum:
            raise OptionsError(f"{self.source}: {key} must be at least {minimum}, got {value!r}")
        return value


def _options(
    *, filters: List[Tuple[int, int]], n_highway: int, lstm_dim: int, projection_dim: int,
    char_embedding_dim: int = 16, n_layers: int = 2,
) -> BiLMOptions:
    return BiLMOptions(
        char_embedding_dim=char_embedding_dim,
        filters=tuple(filters),
        n_highway=n_highway,
        activation="relu",
        n_characters=262,
        max_characters_per_token=50,
        lstm_dim=lstm_dim,
        projection_dim=projection_dim,
        n_layers=n_layers,
        cell_clip=3.0,
        proj_clip=3.0,
        use_skip_connections=True,
    )


_ORIGINAL_FILTERS = [(1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)]

#: The published model sizes (and the reference fixture's), by name.
NAMED_SIZES: Dict[str, BiLMOptions] = {
    "fixture": _options(
        filters=[(1, 4), (2, 8), (3, 16), (4, 32), (5, 64)], n_highway=2, lstm_dim=64,
        projection_dim=16, char_embedding_dim=4,
    ),
    # The shipped English biLM's size: a third of `small`, for CPU training and inference.
    "compact": _options(filters=_ORIGINAL_FILTERS[:6], n_highway=1, lstm_dim=512, projection_dim=128),
    "small": _options(filters=_ORIGINAL_FILTERS, n_highway=1, lstm_dim=1024, projection_dim=128),
    "medium": _options(filters=_ORIGINAL_FILTERS, n_highway=1, lstm_dim=2048, projection_dim=256),
    "original": _options(filters=_ORIGINAL_FILTERS, n_highway=2, lstm_dim=4096, projection_dim=512),
}
