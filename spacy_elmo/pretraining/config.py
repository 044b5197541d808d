"""The pretraining config: a confection (spaCy-style) file, validated into dataclasses."""
import dataclasses
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from confection import Config, ConfigValidationError

from ..errors import ConfigError, OptionsError, one_line, shown
from ..models.pytorch.options import MAX_FLOAT32, NAMED_SIZES, BiLMOptions
from ..models.pytorch.original_format import check_parameter_count, expected_shapes
from .corpus import FORMATS
from .default_config import default_config_text
from .precision import TRAINING_PRECISIONS


@dataclass(frozen=True)
class SystemConfig:
    seed: int


@dataclass(frozen=True)
class CorpusConfig:
    train: str
    dev: Optional[str]
    format: str
    text_field: str
    tokenizer: str
    split_sentences: bool
    max_window: int
    shuffle_buffer: int
    max_dev_sentences: Optional[int]


@dataclass(frozen=True)
class VocabConfig:
    size: int
    min_count: int
    path: Optional[str]


@dataclass(frozen=True)
class ModelConfig:
    size: str
    lstm_dim: Optional[int]
    projection_dim: Optional[int]
    n_layers: Optional[int]
    n_highway: Optional[int]
    char_embedding_dim: Optional[int]
    filters: Optional[List[List[int]]]
    cell_clip: Optional[float]
    proj_clip: Optional[float]
    use_skip_connections: Optional[bool]


@dataclass(frozen=True)
class SoftmaxConfig:
    kind: str
    max_full_vocab: int
    n_negative_samples: int


@dataclass(frozen=True)
class OptimizerConfig:
    name: str
    learn_rate: float
    initial_accumulator: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    warmup_steps: int
    anneal_steps: int
    anneal_to: float


@dataclass(frozen=True)
class TrainingConfig:
    tokens_per_step: int
    max_steps: Optional[int]
    max_epochs: Optional[float]
    sort_window: int
    dropout: float
    gradient_scale: float
    grad_clip: float
    precision: str
    log_every: int
    eval_every: int
    eval_at_start: bool
    checkpoint_every: int
    max_nonfinite_steps: int
    eval_tokens_per_batch: int


@dataclass(frozen=True)
class PretrainConfig:
    seed: int
    corpus: CorpusConfig
    vocab: VocabConfig
    model: ModelConfig
    softmax: SoftmaxConfig
    optimizer: OptimizerConfig
    training: TrainingConfig
    config: Config = field(compare=False, repr=False)

    def to_str(self) -> str:
        """The resolved config (interpolated, overrides applied), as saved with a run."""
        return self.config.to_str()

    def bilm_options(self) -> BiLMOptions:
        """This config's ``[model]`` as biLM options (:func:`resolve_model`)."""
        return resolve_model(self.model)

    def model_sections(self) -> Dict[str, Any]:
        """The settings a resumed run must share with its checkpoint: the model as resolved
        (a named size or the same sizes spelled out), the softmax and the vocabulary."""
        return {
            "model": self.bilm_options().to_dict(), "softmax": dataclasses.asdict(self.softmax),
            "vocab": dataclasses.asdict(self.vocab),
        }


def resolve_model(model: ModelConfig) -> BiLMOptions:
    """``[model]`` as biLM options: the named size with every non-null setting replacing its value."""
    options = NAMED_SIZES[model.size].to_dict()
    for key, value in dataclasses.asdict(model).items():
        if key == "size" or value is None:
            continue
        section = "char_cnn" if key in ("n_highway", "filters") else "lstm"
        if key == "char_embedding_dim":
            options["char_cnn"]["embedding"] = {"dim": value}
        else:
            options[section]["dim" if key == "lstm_dim" else key] = value
    try:
        return BiLMOptions.from_dict(options, source="[model]")
    except OptionsError as err:
        raise ConfigError(str(err)) from None


_SECTIONS = {
    "corpus": CorpusConfig, "vocab": VocabConfig, "model": ModelConfig, "softmax": SoftmaxConfig,
    "optimizer": OptimizerConfig, "training": TrainingConfig,
}
_CHOICES = {
    ("corpus", "format"): ("auto", *FORMATS),
    ("softmax", "kind"): ("auto", "full", "sampled"),
    ("optimizer", "name"): ("adagrad", "adam"),
    ("training", "precision"): TRAINING_PRECISIONS,
    ("model", "size"): tuple(NAMED_SIZES),
}


@dataclass(frozen=True)
class Range:
    """The values a number setting may take: from `low` to `high`, each included unless open.

    :param why: why there is an upper bound, said when a value is above it.
    """

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    why: str = ""

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def __str__(self) -> str:
        if self.high == math.inf:
            return "positive" if (self.low, self.low_open) == (0, True) else f">= {self.low:g}"
        if not (self.low_open or self.high_open) and float(self.high).is_integer() and self.high > 1:
            return f"from {self.low:,} to {self.high:,}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


POSITIVE = Range(0, low_open=True)
AT_LEAST_ZERO = Range(0)
BELOW_ONE = Range(0, 1, high_open=True)
#: Tokens of one step (all processes), and of one held-out batch: far above any GPU's memory is a typo.
MAX_TOKENS_PER_BATCH = 2**20
#: Tokens drawn and sorted at once (``sort_window`` steps' worth); a checkpoint holds up to two draws.
MAX_TOKENS_PER_DRAW = 2**23
#: Sentences of the shuffle buffer (held in memory and in each checkpoint); the default is 20,000.
MAX_SHUFFLE_BUFFER = 2**20
#: A count must fit the 64-bit integers of torch and NumPy.
MAX_INTEGER = 2**63 - 1
#: Adagrad trains at 0.2, Adam at 0.001. Adam's first step is learn_rate / (1 - beta1), at most
#: 1e6 / 1.1e-16 here: a float32 (torch raises an overflow error above one).
MAX_LEARN_RATE = 1e6
#: Every number setting's range (besides [model]'s, which the biLM options check).
_RANGES = {
    ("system", "seed"): Range(0, 2**32 - 1),
    ("corpus", "max_window"): POSITIVE,
    ("corpus", "shuffle_buffer"): Range(
        1, MAX_SHUFFLE_BUFFER, why="the sentences are held in memory and in each checkpoint"
    ),
    ("corpus", "max_dev_sentences"): POSITIVE,
    ("vocab", "size"): POSITIVE,
    ("softmax", "n_negative_samples"): POSITIVE,
    ("optimizer", "learn_rate"): Range(
        0, MAX_LEARN_RATE, low_open=True, why="higher rates never train, and Adam's first step would overflow"
    ),
    ("optimizer", "initial_accumulator"): AT_LEAST_ZERO,
    ("optimizer", "beta1"): BELOW_ONE,
    ("optimizer", "beta2"): BELOW_ONE,
    ("optimizer", "eps"): POSITIVE,
    ("optimizer", "weight_decay"): AT_LEAST_ZERO,
    ("optimizer", "warmup_steps"): AT_LEAST_ZERO,
    ("optimizer", "anneal_steps"): AT_LEAST_ZERO,
    ("optimizer", "anneal_to"): Range(0, 1),
    ("training", "tokens_per_step"): Range(
        1, MAX_TOKENS_PER_BATCH, why="the batches of a step are held in memory together"
    ),
    ("training", "max_steps"): POSITIVE,
    ("training", "max_epochs"): POSITIVE,
    ("training", "sort_window"): POSITIVE,
    ("training", "dropout"): BELOW_ONE,
    ("training", "gradient_scale"): POSITIVE,
    ("training", "grad_clip"): AT_LEAST_ZERO,
    ("training", "log_every"): POSITIVE,
    ("training", "eval_every"): POSITIVE,
    ("training", "checkpoint_every"): POSITIVE,
    ("training", "max_nonfinite_steps"): POSITIVE,
    ("training", "eval_tokens_per_batch"): Range(1, MAX_TOKENS_PER_BATCH, why="a held-out batch is held in memory"),
    ("model", "lstm_dim"): POSITIVE,
    ("model", "projection_dim"): POSITIVE,
    ("model", "n_layers"): POSITIVE,
    ("model", "char_embedding_dim"): POSITIVE,
}


def load_config(
    path: Union[str, Path], overrides: Optional[Dict[str, Any]] = None, *, resumed: Optional[Path] = None
) -> PretrainConfig:
    """Read, override, interpolate and validate a pretraining config file; `resumed`: the
    saved config of the run ``--resume`` continues, if it exists (`known` of :func:`parse_config`)."""
    known = _read(resumed) if resumed is not None and resumed.is_file() else None
    return parse_config(_read(Path(path)), overrides, source=str(path), known=known)


def _read(path: Path) -> str:
    if not path.is_file():
        raise ConfigError(f"Config file not found: {path}")
    try:
        return path.read_text(encoding="utf8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"Cannot read config file {path}: {err}") from None


def parse_config(
    text: str, overrides: Optional[Dict[str, Any]] = None, *, source: str = "config", known: Optional[str] = None
) -> PretrainConfig:
    """Validate config text; settings it leaves out take the defaults of :func:`default_config_text`.

    :param known: a run's saved config: every setting that neither `text` nor
        `overrides` change from the defaults takes its value there (a resumed run
        keeps its paths and the settings it was started with).
    """
    overrides = dict(overrides or {})
    try:
        given = Config().from_str(text, interpolate=False)
        defaults = Config().from_str(default_config_text(), interpolate=False)
        if known is not None:
            overrides = {**_left_to_run(given, defaults, Config().from_str(known, interpolate=False)), **overrides}
        # Settings the file leaves out take their default values.
        merged = defaults.merge(given)
        config = Config().from_str(merged.to_str(), overrides=overrides, interpolate=True)
    except ConfigValidationError as err:
        raise ConfigError(f"{source}: {one_line(err)}") from None
    except Exception as err:  # confection raises assorted parse errors
        raise ConfigError(f"{source}: cannot parse the config ({one_line(err)})") from None
    known = set(_SECTIONS) | {"paths", "system"}
    unknown = sorted(set(config) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) [{'], ['.join(unknown)}]")
    sections = {name: _section(cls, config, name, source) for name, cls in _SECTIONS.items()}
    system = _section(SystemConfig, config, "system", source)
    result = PretrainConfig(seed=system.seed, config=config, **sections)
    _check(result, source)
    return result


def _left_to_run(given: Config, defaults: Config, saved: Config) -> Dict[str, Any]:
    """The `saved` value of every setting that `given` leaves out or at its default value,
    as overrides; a default that refers to another setting (``${paths.train}``) follows it."""
    return {
        f"{section}.{key}": value for section, values in saved.items() for key, value in values.items()
        if key in defaults.get(section, {}) and "${" not in str(defaults[section][key])
        and given.get(section, {}).get(key, defaults[section][key]) == defaults[section][key]
    }


def _section(cls: type, config: Config, name: str, source: str) -> Any:
    """The section `name` of `config` as the dataclass `cls`, every setting checked: its type, choices and range."""
    values = dict(config.get(name) or {})
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(f"{source}: unknown setting(s) in [{name}]: {', '.join(unknown)}")
    missing = [key for key in names if key not in values]
    if missing:
        raise ConfigError(f"{source}: [{name}] is missing {', '.join(missing)}")
    for key in names:
        values[key] = _coerce(values[key], hints[key], f"{source}: {name}.{key}")
        choices = _CHOICES.get((name, key))
        if choices and values[key] not in choices:
            raise ConfigError(
                f"{source}: {name}.{key} must be one of {', '.join(map(repr, choices))}, got {values[key]!r}"
            )
        if values[key] is not None:
            _check_range(values[key], _RANGES.get((name, key)), f"{source}: {name}.{key}")
    return cls(**values)


def _check_range(value: Any, allowed: Optional[Range], where: str) -> None:
    """Raise unless the number `value` is in `allowed` (when given) and an integer fits in 64 bits."""
    if allowed is not None and value not in allowed:
        why = f" ({allowed.why})" if allowed.why and value > allowed.high else ""
        raise ConfigError(f"{where} must be {allowed}{why}, got {shown(value)}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
        raise ConfigError(f"{where} must be at most {MAX_INTEGER:,} (a 64-bit integer), got {shown(value)}")


def _coerce(value: Any, hint: Any, where: str) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is Union:  # Optional[X]
        if value is None:
            return None
        hint = next(a for a in args if a is not type(None))
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not abs(value) <= MAX_FLOAT32:  # also inf, -inf and nan
                raise ConfigError(
                    f"{where} must be a finite number (a 32-bit float, at most {MAX_FLOAT32:.4g}), got {shown(value)}"
                )
            return float(value)
    elif hint is str:
        if isinstance(value, (str, Path)):
            return str(value)
    elif typing.get_origin(hint) in (list, List):
        if isinstance(value, (list, tuple)) and all(
            isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v) for v in value
        ):
            return [list(v) for v in value]
    expected = getattr(hint, "__name__", str(hint))
    if value is None:
        raise ConfigError(f"{where} must be set (a {expected})")
    raise ConfigError(f"{where} must be a {expected}, got {shown(value)}")


def _check(config: PretrainConfig, source: str) -> None:
    """The checks of settings together (each setting's own range is checked as it is read)."""
    training = config.training
    if training.max_steps is None and training.max_epochs is None:
        raise ConfigError(f"{source}: set training.max_steps or training.max_epochs")
    drawn = training.sort_window * training.tokens_per_step
    if drawn > MAX_TOKENS_PER_DRAW:
        raise ConfigError(
            f"{source}: training.sort_window × training.tokens_per_step is {drawn:,} tokens drawn at once, "
            f"more than the {MAX_TOKENS_PER_DRAW:,} a run holds in memory and in each checkpoint; lower either"
        )
    # A biLM larger than spacy-elmo loads could be trained but never used (and is a typo, such as lstm_dim 1e9).
    check_parameter_count(
        sum(math.prod(shape) for shape in expected_shapes(config.bilm_options()).values()), f"{source}: [model]",
        check="lstm_dim, projection_dim and filters", error=ConfigError,
    )
