"""The biLM hyper-parameters, as stored in bilm-tf/AllenNLP `options.json`."""
import dataclasses
import math
import reprlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ...errors import OptionsError, SettingsError


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
    # An ELMoForManyLangs token layer: a word embedding beside the CNN, and a projection always.
    word_embedding_dim: int = 0
    n_words: int = 0
    always_project: bool = False
    extra: Dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def n_filters(self) -> int:
        """Width of the character CNN output (sum of filter counts)."""
        return sum(count for _, count in self.filters)

    @property
    def token_features(self) -> int:
        """Width of what the projection reads: the word embedding, then the CNN output."""
        return self.word_embedding_dim + self.n_filters

    @property
    def has_char_projection(self) -> bool:
        """bilm-tf projects the CNN output only when its width differs."""
        return self.always_project or self.token_features != self.projection_dim

    @property
    def n_output_layers(self) -> int:
        """L + 1: the token layer plus one per LSTM layer."""
        return self.n_layers + 1

    @property
    def output_dim(self) -> int:
        """Width of every output layer: forward and backward halves."""
        return 2 * self.projection_dim

    @classmethod
    def named(cls, size: str, **changes: Any) -> "BiLMOptions":
        """The options of a named size (:data:`NAMED_SIZES`), with `changes` (e.g.
        ``lstm_dim=256``) checked as `options.json`'s values are."""
        if size not in NAMED_SIZES:
            raise SettingsError(f"Unknown biLM size {size!r}; choose from {', '.join(NAMED_SIZES)}")
        options = dataclasses.replace(NAMED_SIZES[size], **changes)
        return cls.from_dict(options.to_dict(), source=f"BiLMOptions.named({size!r})")

    @classmethod
    def from_dict(cls, options: Dict[str, Any], *, source: str = "options") -> "BiLMOptions":
        """Read the `options.json` layout; a missing or invalid value raises `OptionsError`.

        It names `source`, the key (``lstm.dim``) and the value. Every number is checked, also under keys kept in
        `extra`: finite (Python's json reads NaN and Infinity), and for the biLM's own keys a whole number where it must
        be one (a bool is not) and in range."""
        check_every_value(options, source)
        get = OptionReader(options, source)
        activation = get("char_cnn.activation", str)
        if activation not in ("relu", "tanh"):
            raise OptionsError(f"{source}: char_cnn.activation must be 'relu' or 'tanh', got {activation!r}")
        max_chars = get("char_cnn.max_characters_per_token", int, default=50)
        if max_chars != 50:
            raise OptionsError(
                f"{source}: char_cnn.max_characters_per_token must be 50 (the "
                f"character-id layout), got {max_chars}"
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
            filters=get.filters(max_width=max_chars),
            n_highway=get("char_cnn.n_highway", int, minimum=0, maximum=MAX_REPEATS),
            activation=activation,
            # bilm-tf writes 261 while it trains and reads the same weights with 262 (its README:
            # set 262 for inference; the extra row is padding), as the published German model has it.
            n_characters=max(262, get("char_cnn.n_characters", int, default=262, minimum=261)),
            max_characters_per_token=max_chars,
            lstm_dim=lstm_dim,
            projection_dim=get("lstm.projection_dim", int, default=lstm_dim, minimum=1),
            n_layers=get("lstm.n_layers", int, minimum=1, maximum=MAX_REPEATS),
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


#: The most LSTM layers, highway layers or CNN filters options may declare (the published
#: models have 2, at most 2 and 7). Each is a module of its own: 10**9 of them would take
#: all memory before the biLM's size could even be counted.
MAX_REPEATS = 64
#: How deep `options.json` may nest: the layout itself goes three levels deep
#: (``char_cnn.filters[0][1]``); deeper, reading and writing the file would recurse without end.
MAX_DEPTH = 32

#: The largest float32: the biLM computes in 32 bits, so a larger clip overflows at its first step.
MAX_FLOAT32 = 3.4028234663852886e38

_MISSING = object()


class _Invalid(Exception):
    """A value is not what its key needs; the message names the key, not the file."""


class OptionReader:
    """Reads dotted keys (``lstm.dim``) of an options dict with type and range checks."""

    def __init__(self, options: Dict[str, Any], source: str) -> None:
        self.options = options
        self.source = source

    def __call__(
        self, key: str, kind: type, *, default: Any = _MISSING,
        minimum: Optional[float] = None, maximum: Optional[float] = None,
    ) -> Any:
        value = self._lookup(key)
        if value is _MISSING or (value is None and default is None):
            if default is _MISSING:
                raise OptionsError(f"{self.source}: missing option {key}")
            return default
        try:
            if kind in (int, float):
                return _number(key, value, kind, minimum, maximum)
            if not isinstance(value, kind):
                raise _Invalid(f"{key} must be a {kind.__name__}, got {reprlib.repr(value)}")
        except _Invalid as err:
            raise OptionsError(f"{self.source}: {err}") from None
        return value

    def filters(self, *, max_width: int, key: str = "char_cnn.filters") -> Tuple[Tuple[int, int], ...]:
        """`key`: 1 to :data:`MAX_REPEATS` pairs [width, count]."""
        raw = self(key, list)
        try:
            if not 1 <= len(raw) <= MAX_REPEATS:
                raise _Invalid(f"{key} has {len(raw)} filters, not 1 to {MAX_REPEATS}")
            return tuple(self._filter(f"{key}[{i}]", pair, max_width) for i, pair in enumerate(raw))
        except _Invalid as err:
            raise OptionsError(
                f"{self.source}: invalid {key}: {err} (expected [[width, count], ...] "
                f"with 1 <= width <= {max_width} and count >= 1)"
            ) from None

    @staticmethod
    def _filter(key: str, pair: Any, max_width: int) -> Tuple[int, int]:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise _Invalid(f"{key} must be [width, count], got {reprlib.repr(pair)}")
        return _number(f"{key}[0]", pair[0], int, 1, max_width), _number(f"{key}[1]", pair[1], int, 1, None)

    def _lookup(self, key: str) -> Any:
        value: Any = self.options
        parts = key.split(".")
        for depth, part in enumerate(parts):
            if not isinstance(value, dict):
                where = ".".join(parts[:depth]) or "the options"
                raise OptionsError(f"{self.source}: {where} must be an object, got {reprlib.repr(value)}")
            value = value.get(part, _MISSING)
            if value is _MISSING:
                break
        return value


def _number(key: str, value: Any, kind: type, minimum: Optional[float], maximum: Optional[float]) -> Any:
    """`value` as a `kind` (int or float) in [minimum, maximum], or `_Invalid`: the one
    check of an option's number (its finiteness: :func:`check_every_value`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(f"{key} must be a number, got {reprlib.repr(value)}")
    if kind is int and value != int(value):
        raise _Invalid(f"{key} must be a whole number, got {value!r}")
    if kind is float and abs(value) > MAX_FLOAT32:
        raise _Invalid(f"{key} must be a finite number (a 32-bit float, at most {MAX_FLOAT32:.4g}), got {value!r}")
    value = kind(value)
    if minimum is not None and value < minimum:
        raise _Invalid(f"{key} must be at least {minimum}, got {reprlib.repr(value)}")
    if maximum is not None and value > maximum:
        raise _Invalid(f"{key} must be at most {maximum}, got {reprlib.repr(value)}")
    return value


def check_every_value(options: Any, source: str) -> None:
    """Refuse NaN and infinities under any key, and nesting deeper than :data:`MAX_DEPTH`."""
    pending: List[Tuple[str, Any, int]] = [("", options, 0)]
    while pending:  # a loop, not recursion: the depth is what is being checked
        key, value, depth = pending.pop()
        if depth > MAX_DEPTH:
            shown = key if len(key) <= 60 else key[:57] + "..."
            raise OptionsError(f"{source}: {shown} is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, float) and not math.isfinite(value):
            raise OptionsError(f"{source}: {key} must be a finite number, got {value!r}")
        if isinstance(value, dict):
            pending.extend((f"{key}.{name}" if key else str(name), child, depth + 1) for name, child in value.items())
        elif isinstance(value, (list, tuple)):
            pending.extend((f"{key}[{i}]", child, depth + 1) for i, child in enumerate(value))


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

#: Model sizes by name: the published ones, and `tiny` (about 100k parameters, the reference
#: fixtures' size) for trying a setup in seconds.
NAMED_SIZES: Dict[str, BiLMOptions] = {
    "tiny": _options(
        filters=[(1, 4), (2, 8), (3, 16), (4, 32), (5, 64)], n_highway=2, lstm_dim=64,
        projection_dim=16, char_embedding_dim=4,
    ),
    # The shipped English biLM's size: a third of `small`, for CPU training and inference.
    "compact": _options(filters=_ORIGINAL_FILTERS[:6], n_highway=1, lstm_dim=512, projection_dim=128),
    "small": _options(filters=_ORIGINAL_FILTERS, n_highway=1, lstm_dim=1024, projection_dim=128),
    "medium": _options(filters=_ORIGINAL_FILTERS, n_highway=1, lstm_dim=2048, projection_dim=256),
    "original": _options(filters=_ORIGINAL_FILTERS, n_highway=2, lstm_dim=4096, projection_dim=512),
}
