"""Copy a finished pretraining run into the packages of one of spacy-elmo's own models.

Usage: python tools/ship_model.py RUN_DIR NAME   (english-compact, portuguese-compact)

Copies options.json and weights.hdf5 (float32, unchanged) where the model's biLM installs from
(english-compact: spacy_elmo/resources/english_compact; portuguese-compact: models/portuguese-compact),
vocab.txt and the softmax in float16 (half the bytes; `pretrain --init-from NAME` reads it back as
float32 to continue the language model) into models/NAME-lm, then prints each file's SHA-256 for
NAMED_MODELS (spacy_elmo/named_models.py), which checks files put in the cache by hand. The model
card (MODEL_CARD.md, beside the weights) is written by hand.
"""
import hashlib
import shutil
import sys
from pathlib import Path

import h5py

from spacy_elmo.model_packages import CHECKOUT_MODELS, ModelPart
from spacy_elmo.named_models import NAMED_MODELS
from spacy_elmo.output_files import atomic_output_path


def checkout_folder(part: ModelPart) -> Path:
    """Where `part`'s files live in this checkout."""
    if part.project is None:
        return Path(__file__).resolve().parent.parent / part.module / part.folder
    return CHECKOUT_MODELS / part.project / part.module / part.folder


def main(run_dir: Path, name: str) -> None:
    model = NAMED_MODELS[name]
    bilm, language_model = checkout_folder(model.bilm), checkout_folder(model.language_model)
    for folder, file_name in ((bilm, "options.json"), (bilm, "weights.hdf5"), (language_model, "vocab.txt")):
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_output_path(folder / file_name) as tmp:
            shutil.copyfile(run_dir / file_name, tmp)
    with h5py.File(run_dir / "softmax.hdf5", "r") as source, atomic_output_path(language_model / "softmax.hdf5") as tmp:
        with h5py.File(tmp, "w") as target:
            for dataset in ("softmax/W", "softmax/b"):
                target.create_dataset(dataset, data=source[dataset][()].astype("float16"))
    for path in (bilm / "options.json", bilm / "weights.hdf5", language_model / "softmax.hdf5", language_model / "vocab.txt"):
        print(f"{path}: {path.stat().st_size:,} bytes, SHA-256 {hashlib.sha256(path.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in NAMED_MODELS or NAMED_MODELS[sys.argv[2]].language_model is None:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2])
