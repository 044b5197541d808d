"""The ELMoForManyLangs model format (HIT-SCIR: 44 languages, torch state dicts), as :mod:`.formats` asks.

``config.json``'s ``config_path`` is read from the folder only, by file name; published folders lack it and use
:data:`PUBLISHED_CONFIG`. Unlike ELMo: token ids from a character vocabulary, a word embedding before the projection,
and a highway gate that carries the input (its sign flipped here).
"""
import dataclasses
import math
import reprlib
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy
import torch

from ...errors import OptionsError, WeightsError, one_line
from ...input_files import MAX_VOCABULARY_BYTES, check_regular_file, read_regular_file
from .bilm import ElmoBiLM
from .char_ids import padded_ids
from .options import MAX_REPEATS, BiLMOptions, OptionReader, check_every_value
from .original_format import PathLike, check_parameter_count, permute_gates, read_json
from .state_dicts import max_state_bytes, read_state_dict

BOS, EOS, OOV, PAD, BOW, EOW = "<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"
CHARACTER_SPECIALS = (BOS, EOS, OOV, PAD, BOW, EOW)
WORD_SPECIALS = (BOS, EOS, OOV)

CONFIG_NAME = "config.json"
DESCRIPTION_KEY = "elmoformanylangs"
STATE_FILES = ("token_embedder.pkl", "encoder.pkl")
#: The model config of every published model (``cnn_50_100_512_4096_sample.json``).
PUBLISHED_CONFIG: Dict[str, Any] = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn", "activation": "relu", "n_highway": 2, "word_dim": 100, "char_dim": 50,
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "max_characters_per_token": 50,
    },
}
PUBLISHED_CONFIG_NAMES = ("cnn_50_100_512_4096_sample.json", "cnn_0_100_512_4096_sample.json")
# ELMoForManyLangs' gate blocks are i, f, g, o; the model keeps i, f, o, g.
_FILE_TO_MODEL_GATES = (0, 1, 3, 2)


@dataclasses.dataclass(frozen=True)
class DictionaryIds:
    """Token ids from a character vocabulary (and a word vocabulary), as ELMoForManyLangs reads its input.

    A token (cut to ``max_chars - 2`` characters) becomes ``[word?, EOW, c_1 .. c_n, BOW, PAD, ...]`` (the word id only
    with a word embedding); unknown characters and words get ``<oov>``, the sentence boundaries are the one-character
    tokens ``<bos>``/``<eos>``; every id +1 (0: padding). ``characters``, ``words``: ids in the embedding (from 0)."""

    characters: Dict[str, int]
    words: Optional[Dict[str, int]]
    max_chars: int

    @property
    def word_columns(self) -> int:
        return 0 if self.words is None else 1

    @property
    def pad_id(self) -> int:
        return self.characters[PAD] + 1

    @property
    def boundary_rows(self) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        return self.row(BOS), self.row(EOS)

    def row(self, token: str) -> Tuple[int, ...]:
        """The ids of one token, *Shape:* ``(word_columns + max_chars,)``."""
        token = token[: self.max_chars - 2]
        chars = self.characters
        payload = [chars[token]] if token in (BOS, EOS) else [chars.get(c, chars[OOV]) for c in token]
        ids = [chars[EOW] + 1, *(char + 1 for char in payload), chars[BOW] + 1]
        word = () if self.words is None else (self.words.get(token, self.words[OOV]) + 1,)
        return (*word, *ids, *[chars[PAD] + 1] * (self.max_chars - len(ids)))

    def rows(self, words: Sequence[str]) -> numpy.ndarray:
        """Each word's :meth:`row`, *Shape:* ``(n_words, word_columns + max_chars)``, int64."""
        return numpy.array([self.row(word) for word in words], dtype=numpy.int64).reshape(
            len(words), self.word_columns + self.max_chars
        )

    def batch(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """*Shape:* ``(n_sentences, max_tokens, word_columns + max_chars)``, int64 (as :class:`.char_ids.TokenIds`)."""
        return padded_ids(sentences, self.rows, self.word_columns + self.max_chars)

    def to_dict(self) -> Dict[str, Any]:
        """Entries in id order, for serialization (read back with :func:`from_id_order`)."""
        return {
            "characters": sorted(self.characters, key=self.characters.__getitem__),
            "words": None if self.words is None else sorted(self.words, key=self.words.__getitem__),
            "max_chars": self.max_chars,
        }


def checked_entries(
    entries: Sequence[Tuple[int, str, int]], specials: Tuple[str, ...], source: str, unit: str
) -> Dict[str, int]:
    """A vocabulary from its ``(position, entry, id)`` triples (position: a `unit` of `source`):
    each id one entry's, every id below the number of entries, the `specials` among them.
    Messages name positions, never entries: a vocabulary may be any file a link points at."""
    ids: Dict[str, int] = {}
    positions: Dict[int, int] = {}
    for position, entry, i in entries:
        if i in positions:
            raise WeightsError(
                f"{source}, {unit} {position}: id {i} is also the id of {unit} {positions[i]}; "
                "each entry needs an id of its own"
            )
        positions[i] = position
        ids[entry] = i
    missing = [special for special in specials if special not in ids]
    if missing:
        raise WeightsError(f"{source}: lacks the entries {', '.join(missing)}")
    for i, position in positions.items():
        if i >= len(ids):
            raise WeightsError(f"{source}, {unit} {position}: id {i} is not below the number of entries ({len(ids):,})")
    return ids


def from_id_order(keys: Any, specials: Tuple[str, ...], source: str) -> Dict[str, int]:
    """The vocabulary that :meth:`DictionaryIds.to_dict` wrote as `keys`, checked (:func:`checked_entries`)."""
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise WeightsError(f"{source}: not a list of entries")
    return checked_entries([(i + 1, key, i) for i, key in enumerate(keys)], specials, source, "entry")


NAME = "ELMoForManyLangs"
#: Pretraining reads UTF-8 bytes: it cannot continue a model of a character vocabulary.
TRAINABLE = False


def claims(path: PathLike) -> bool:
    """Whether `path` is a folder of ELMoForManyLangs files: its ``config.json`` and any
    other (the loader names those missing)."""
    path = Path(path)
    others = ("char.dic", "word.dic", *STATE_FILES)
    return path.is_dir() and (path / CONFIG_NAME).is_file() and any((path / name).exists() for name in others)


def model_files(folder: Path, options: Optional[Path] = None) -> Tuple[Path, Path]:
    """The model folder and its ``config.json``, which names the rest (no other options file)."""
    if options is not None and Path(options).resolve() != (folder / CONFIG_NAME).resolve():
        raise OptionsError(f"{folder} is an ELMoForManyLangs model: its {CONFIG_NAME} names its model config, not {options}")
    return folder, folder / CONFIG_NAME


def load(folder: PathLike, options_file: Optional[PathLike] = None) -> ElmoBiLM:
    """The biLM of an ELMoForManyLangs model folder (its ``config.json`` names the model
    config, not `options_file`); every file checked (values, shapes, sizes) before use."""
    folder, _ = model_files(Path(folder), None if options_file is None else Path(options_file))
    options, token_ids = read_skeleton(folder)
    shapes = expected_shapes(options)
    states = {name: _read_state(folder / name, shapes[name]) for name in STATE_FILES}
    bilm = ElmoBiLM(options, token_ids)
    _set_state(bilm, states["token_embedder.pkl"], states["encoder.pkl"])
    return bilm


def read_skeleton(folder: Path) -> Tuple[BiLMOptions, DictionaryIds]:
    """The sizes and vocabularies of the model in `folder`, every value checked, its state dicts not read."""
    model_config, source = _model_config(folder)
    characters = read_dictionary(folder / "char.dic", CHARACTER_SPECIALS)
    has_words = OptionReader(model_config, source)("token_embedder.word_dim", int, minimum=0) > 0
    words = read_dictionary(folder / "word.dic", WORD_SPECIALS) if has_words else None
    options = model_options(model_config, source, characters, words)
    return options, DictionaryIds(characters, words, options.max_characters_per_token)


def model_options(
    model_config: Dict[str, Any], source: str, characters: Dict[str, int], words: Optional[Dict[str, int]]
) -> BiLMOptions:
    """The biLM options of an ELMoForManyLangs model config (its values already checked
    finite by :func:`~.options.check_every_value`) with its vocabularies: every value
    checked, and the biLM at most :data:`~.original_format.MAX_PARAMETERS` large."""
    get = OptionReader(model_config, source)
    for key, expected in (("encoder.name", "elmo"), ("token_embedder.name", "cnn")):
        name = get(key, str)
        if name != expected:
            raise OptionsError(f"{source}: {key} must be {expected!r} (the ELMo architecture), got {name!r}")
    max_chars = get("token_embedder.max_characters_per_token", int, minimum=3, maximum=1000)
    word_dim = get("token_embedder.word_dim", int, minimum=0)
    if (words is not None) != (word_dim > 0):
        has = "a" if words is not None else "no"
        raise OptionsError(f"{source}: token_embedder.word_dim is {word_dim}, but the model has {has} word vocabulary")
    activation = get("token_embedder.activation", str)
    if activation not in ("relu", "tanh"):
        raise OptionsError(f"{source}: token_embedder.activation must be 'relu' or 'tanh', got {activation!r}")
    options = BiLMOptions(
        char_embedding_dim=get("token_embedder.char_dim", int, minimum=1),
        filters=get.filters(max_width=max_chars, key="token_embedder.filters"),
        n_highway=get("token_embedder.n_highway", int, minimum=0, maximum=MAX_REPEATS),
        activation=activation,
        n_characters=len(characters) + 1,  # row 0: a padded token
        max_characters_per_token=max_chars,
        lstm_dim=get("encoder.dim", int, minimum=1),
        projection_dim=get("encoder.projection_dim", int, minimum=1),
        n_layers=get("encoder.n_layers", int, minimum=1, maximum=MAX_REPEATS),
        cell_clip=get("encoder.cell_clip", float, minimum=0) or None,  # 0: no clipping
        proj_clip=get("encoder.proj_clip", float, minimum=0) or None,
        use_skip_connections=True,
        word_embedding_dim=word_dim,
        n_words=len(words) + 1 if words is not None else 0,
        always_project=True,
    )
    shapes = expected_shapes(options)
    check_parameter_count(
        sum(math.prod(shape) for file in shapes.values() for shape in file.values()), source,
        counted=" (vocabularies included)", check="encoder.dim, encoder.projection_dim and token_embedder.filters",
    )
    return options


def _model_config(folder: Path) -> Tuple[Dict[str, Any], str]:
    """The model config that ``config.json`` names, and how messages name it."""
    config_path = folder / CONFIG_NAME
    config = read_json(config_path, source=str(config_path))
    name = config_file_name(config)
    if not name:
        raise OptionsError(f"{config_path}: no config_path (the model config's file name) in it")
    if (folder / name).is_file():
        model_config = read_json(folder / name, source=str(folder / name))
        source = str(folder / name)
    elif name in PUBLISHED_CONFIG_NAMES:
        model_config, source = PUBLISHED_CONFIG, f"{config_path} ({name}, the published model config)"
    else:
        raise OptionsError(
            f"{config_path}: the model config {name} is not in {folder} (copy it there from the "
            f"training run; the published models use {PUBLISHED_CONFIG_NAMES[0]}, known to spacy-elmo)"
        )
    if not isinstance(model_config, dict):
        raise OptionsError(f"{source}: not a model config (a JSON object with encoder and token_embedder)")
    check_every_value(model_config, source)
    return model_config, source


def config_file_name(config: Any) -> str:
    """The file name of the model config that a ``config.json`` names ("" if none): its
    ``config_path`` may be a path of the training machine (either separator)."""
    named = config.get("config_path") if isinstance(config, dict) else None
    return Path(named.strip().replace("\\", "/")).name if isinstance(named, str) else ""


def read_dictionary(path: Path, specials: Tuple[str, ...]) -> Dict[str, int]:
    """``char.dic`` or ``word.dic``: one ``entry<TAB>id`` a line, ids from 0, read as
    ELMoForManyLangs reads them (lines split as Python splits them, whitespace
    stripped; an entry that is all whitespace becomes U+3000), and checked
    (:func:`checked_entries`)."""
    data = read_regular_file(path, max_bytes=MAX_VOCABULARY_BYTES, error=WeightsError, what="Vocabulary")
    try:
        text = data.decode("utf8")
    except UnicodeDecodeError as err:
        raise WeightsError(f"{path}: not UTF-8 text (byte {err.start})") from None
    entries: List[Tuple[int, str, int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.strip().split("\t")
        if parts == [""]:
            continue
        if len(parts) == 1:
            parts = ["\u3000", parts[0]]
        if len(parts) != 2 or not parts[1].isascii() or not parts[1].isdigit():
            raise WeightsError(f"{path}, line {number}: expected an entry, a tab and its id (a whole number)")
        if len(parts[1]) > 9:  # more entries than a vocabulary file can hold
            raise WeightsError(
                f"{path}, line {number}: an id of {len(parts[1]):,} digits, more than a vocabulary counts"
            )
        entries.append((number, parts[0], int(parts[1])))
    return checked_entries(entries, specials, str(path), "line")


def expected_shapes(options: BiLMOptions) -> Dict[str, Dict[str, Tuple[int, ...]]]:
    """Every tensor of the two state dicts with the shape the model config implies."""
    embedder: Dict[str, Tuple[int, ...]] = {}
    if options.word_embedding_dim:
        embedder["word_emb_layer.embedding.weight"] = (options.n_words - 1, options.word_embedding_dim)
    embedder["char_emb_layer.embedding.weight"] = (options.n_characters - 1, options.char_embedding_dim)
    for i, (width, count) in enumerate(options.filters):
        embedder[f"convolutions.{i}.weight"] = (count, options.char_embedding_dim, width)
        embedder[f"convolutions.{i}.bias"] = (count,)
    width = options.n_filters
    for k in range(options.n_highway):
        embedder[f"highways._layers.{k}.weight"] = (2 * width, width)
        embedder[f"highways._layers.{k}.bias"] = (2 * width,)
    embedder["projection.weight"] = (options.projection_dim, options.token_features)
    embedder["projection.bias"] = (options.projection_dim,)
    encoder: Dict[str, Tuple[int, ...]] = {}
    hidden, proj = options.lstm_dim, options.projection_dim
    for layer in range(options.n_layers):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}"
            encoder[f"{prefix}.input_linearity.weight"] = (4 * hidden, proj)
            encoder[f"{prefix}.state_linearity.weight"] = (4 * hidden, proj)
            encoder[f"{prefix}.state_linearity.bias"] = (4 * hidden,)
            encoder[f"{prefix}.state_projection.weight"] = (proj, hidden)
    return {"token_embedder.pkl": embedder, "encoder.pkl": encoder}


def _read_state(path: Path, shapes: Dict[str, Tuple[int, ...]]) -> Dict[str, torch.Tensor]:
    """A state dict saved by ``torch.save``, once its file's size fits the shapes (read_state_dict checks the rest)."""
    check_regular_file(path, WeightsError, "Weights")
    if not path.is_file():
        raise WeightsError(f"Weights file not found: {path} (an ELMoForManyLangs model folder holds it)")
    check_state_size(path, path.stat().st_size, shapes)
    state = read_state_dict(path, shapes, str(path))
    return {name: state[name].to(torch.float32) for name in shapes}


def check_state_size(path: Path, size: int, shapes: Dict[str, Tuple[int, ...]]) -> None:
    """Refuse a state dict file of `size` bytes far larger than `shapes` take in float32."""
    expected_bytes = 4 * sum(math.prod(shape) for shape in shapes.values())
    if size > max_state_bytes(shapes):
        raise WeightsError(f"{path}: {size:,} bytes, far more than the {expected_bytes:,} its model config implies")


def _set_state(bilm: ElmoBiLM, embedder: Dict[str, torch.Tensor], encoder: Dict[str, torch.Tensor]) -> None:
    options, chars, lstm = bilm.options, bilm.char_encoder, bilm.lstm
    width, hidden = options.n_filters, options.lstm_dim
    with torch.no_grad():
        chars.char_embedding[0].zero_()
        chars.char_embedding[1:].copy_(embedder["char_emb_layer.embedding.weight"])
        if chars.word_embedding is not None:
            chars.word_embedding[0].zero_()
            chars.word_embedding[1:].copy_(embedder["word_emb_layer.embedding.weight"])
        for i, conv in enumerate(chars.convolutions):
            conv.weight.copy_(embedder[f"convolutions.{i}.weight"])
            conv.bias.copy_(embedder[f"convolutions.{i}.bias"])
        for k, (weight, bias) in enumerate(zip(chars.highway_weights, chars.highway_biases)):
            # Rows [transform | gate]; their gate weighs the input, this model's the transform.
            flip = torch.cat([torch.ones(width), -torch.ones(width)])
            weight.copy_((embedder[f"highways._layers.{k}.weight"] * flip[:, None]).T)
            bias.copy_(embedder[f"highways._layers.{k}.bias"] * flip)
        assert chars.projection is not None  # always_project
        chars.projection.weight.copy_(embedder["projection.weight"])
        chars.projection.bias.copy_(embedder["projection.bias"])
        for layer in range(options.n_layers):
            for d, direction in enumerate(("forward", "backward")):
                prefix = f"{direction}_layer_{layer}"
                input_weight = encoder[f"{prefix}.input_linearity.weight"].T
                hidden_weight = encoder[f"{prefix}.state_linearity.weight"].T
                lstm.input_weights[layer][d].copy_(permute_gates(input_weight, _FILE_TO_MODEL_GATES))
                lstm.hidden_weights[layer][d].copy_(permute_gates(hidden_weight, _FILE_TO_MODEL_GATES))
                bias = permute_gates(encoder[f"{prefix}.state_linearity.bias"], _FILE_TO_MODEL_GATES)
                bias[hidden : 2 * hidden] -= 1.0  # the model adds TensorFlow's forget bias of 1
                lstm.biases[layer][d].copy_(bias)
                lstm.projections[layer][d].copy_(encoder[f"{prefix}.state_projection.weight"].T)


def describe(bilm: ElmoBiLM) -> Optional[Dict[str, Any]]:
    """What rebuilds the skeleton of `bilm`, a model read by this module (with
    :func:`rebuild`): its sizes and vocabularies, as plain data; None for another format's."""
    if not isinstance(bilm.token_ids, DictionaryIds):
        return None
    options = {f.name: getattr(bilm.options, f.name) for f in dataclasses.fields(BiLMOptions) if f.name != "extra"}
    options["filters"] = [list(pair) for pair in options["filters"]]
    return {DESCRIPTION_KEY: {"options": options, "token_ids": bilm.token_ids.to_dict()}}


def rebuild(data: Dict[str, Any]) -> Optional[ElmoBiLM]:
    """The skeleton :func:`describe` describes (its weights come separately; None for another
    format's description), checked as a model folder is: its options as a model config
    (:func:`model_options`), its vocabularies as ``char.dic`` and ``word.dic``."""
    if DESCRIPTION_KEY not in data:
        return None
    source = "the serialized elmo model"
    try:
        stored = data[DESCRIPTION_KEY]
        options, token_ids = stored["options"], stored["token_ids"]
        model_config = {
            "encoder": {
                "name": "elmo", "dim": options["lstm_dim"], "projection_dim": options["projection_dim"],
                "n_layers": options["n_layers"], "cell_clip": options["cell_clip"] or 0,
                "proj_clip": options["proj_clip"] or 0,
            },
            "token_embedder": {
                "name": "cnn", "activation": options["activation"], "filters": options["filters"],
                "n_highway": options["n_highway"], "word_dim": options["word_embedding_dim"],
                "char_dim": options["char_embedding_dim"],
                "max_characters_per_token": options["max_characters_per_token"],
            },
        }
        characters, words, max_chars = token_ids["characters"], token_ids["words"], token_ids["max_chars"]
    except (KeyError, TypeError) as err:
        raise OptionsError(f"{source}: not an ELMoForManyLangs model's description ({one_line(err)[:200]})") from None
    characters = from_id_order(characters, CHARACTER_SPECIALS, f"{source}: its characters")
    words = None if words is None else from_id_order(words, WORD_SPECIALS, f"{source}: its words")
    check_every_value(model_config, source)
    bilm_options = model_options(model_config, source, characters, words)
    if max_chars != bilm_options.max_characters_per_token:
        raise OptionsError(
            f"{source}: token_ids.max_chars is {reprlib.repr(max_chars)}, but its options say "
            f"max_characters_per_token {bilm_options.max_characters_per_token}"
        )
    return ElmoBiLM(bilm_options, DictionaryIds(characters, words, bilm_options.max_characters_per_token))
