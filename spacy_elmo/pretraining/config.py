"""The pretraining config: a confection (spaCy-style) file, validated into dataclasses."""
import dataclasses
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from confection import Config, ConfigValidationError

from ..models.pytorch.options import NAMED_SIZES, BiLMOptions
from ..models.pytorch.original_format import expected_shapes
from ..errors import OptionsError, one_line
from .corpus import FORMATS
from .default_config import default_config_text
from .errors import ConfigError
from .precision import PRECISIONS

MODEL_KEYS = (
    "lstm_dim", "projection_dim", "n_layers", "n_highway", "char_embedding_dim", "filters",
    "cell_clip", "proj_clip", "use_skip_connections",
)


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
    for key in MODEL_KEYS:
        value = getattr(model, key)
        if value is None:
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
    ("training", "precision"): PRECISIONS,
    ("model", "size"): tuple(NAMED_SIZES),
}
_POSITIVE = {
    ("corpus", "max_window"), ("corpus", "shuffle_buffer"), ("corpus", "max_dev_sentences"),
    ("vocab", "size"), ("softmax", "n_negative_samples"), ("optimizer", "learn_rate"),
    ("training", "tokens_per_step"), ("training", "max_steps"), ("training", "max_epochs"),
    ("training", "sort_window"), ("training", "log_every"), ("training", "eval_every"),
    ("training", "checkpoint_every"), ("training", "max_nonfinite_steps"),
    ("training", "eval_tokens_per_batch"), ("training", "gradient_scale"), ("model", "lstm_dim"), ("model", "projection_dim"),
    ("model", "n_layers"), ("model", "char_embedding_dim"),
}


def load_config(path: Union[str, Path], overrides: Optional[Dict[str, Any]] = None) -> PretrainConfig:
    """Read, override, interpolate and validate a pretraining config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Config file not found: {path}")
    try:
        text = path.read_text(encoding="utf8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"Cannot read config file {path}: {err}") from None
    return parse_config(text, overrides, source=str(path))


def parse_config(
    text: str, overrides: Optional[Dict[str, Any]] = None, *, source: str = "config"
) -> PretrainConfig:
    """Validate config text; settings it leaves out take the defaults of :func:`default_config_text`."""
    overrides = dict(overrides or {})
    try:
        # Settings the file leaves out take their default values.
        given = Config().from_str(text, interpolate=False)
        merged = Config().from_str(default_config_text(), interpolate=False).merge(given)
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
    system = config.get("system", {})
    seed = system.get("seed", 0)
    if set(system) - {"seed"} or not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"{source}: [system] takes one integer setting, seed")
    result = PretrainConfig(seed=seed, config=config, **sections)
    _check(result, source)
    return result


def _section(cls: type, config: Config, name: str, source: str) -> Any:
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
        if (name, key) in _POSITIVE and values[key] is not None and values[key] <= 0:
            raise ConfigError(f"{source}: {name}.{key} must be positive, got {values[key]!r}")
    return cls(**values)


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
    raise ConfigError(f"{where} must be a {expected}, got {value!r}")


#: The published `original` biLM has 93.6M parameters; far above it is a typo (lstm_dim 1e9).
MAX_PARAMETERS = 2_000_000_000


def _check(config: PretrainConfig, source: str) -> None:
    if not 0.0 <= config.training.dropout < 1.0:
        raise ConfigError(f"{source}: training.dropout must be in [0, 1), got {config.training.dropout}")
    if config.training.grad_clip < 0:
        raise ConfigError(f"{source}: training.grad_clip must be >= 0, got {config.training.grad_clip}")
    if config.training.max_steps is None and config.training.max_epochs is None:
        raise ConfigError(f"{source}: set training.max_steps or training.max_epochs")
    optimizer = config.optimizer
    if optimizer.warmup_steps < 0 or optimizer.anneal_steps < 0:
        raise ConfigError(
            f"{source}: optimizer.warmup_steps and optimizer.anneal_steps must be 0 or more, "
            f"got {optimizer.warmup_steps} and {optimizer.anneal_steps}"
        )
    if not 0.0 <= optimizer.anneal_to <= 1.0:
        raise ConfigError(f"{source}: optimizer.anneal_to must be in [0, 1], got {optimizer.anneal_to}")
    for key, value, ok, rule in (
        ("initial_accumulator", optimizer.initial_accumulator, optimizer.initial_accumulator >= 0, ">= 0"),
        ("beta1", optimizer.beta1, 0.0 <= optimizer.beta1 < 1.0, "in [0, 1)"),
        ("beta2", optimizer.beta2, 0.0 <= optimizer.beta2 < 1.0, "in [0, 1)"),
        ("eps", optimizer.eps, optimizer.eps > 0, "> 0"),
        ("weight_decay", optimizer.weight_decay, optimizer.weight_decay >= 0, ">= 0"),
    ):
        if not ok:
            raise ConfigError(f"{source}: optimizer.{key} must be {rule}, got {value}")
    check_size(config.bilm_options(), source)


def check_size(options: BiLMOptions, source: str) -> None:
    """Refuse a biLM of more than :data:`MAX_PARAMETERS` parameters (a typo, such as lstm_dim 1e9)."""
    n_parameters = sum(math.prod(shape) for shape in expected_shapes(options).values())
    if n_parameters > MAX_PARAMETERS:
        raise ConfigError(
            f"{source}: [model] describes a biLM of {n_parameters:,} parameters, more than the "
            f"{MAX_PARAMETERS:,} this trainer allows (check lstm_dim, projection_dim and filters)"
        )
