"""Copy a finished pretraining run into the package as a shipped biLM.

Usage: python tools/ship_model.py RUN_DIR spacy_elmo/resources/FOLDER   (english_compact, portuguese_compact)

Copies options.json, weights.hdf5 (float32, unchanged) and vocab.txt, and writes the softmax
in float16 (half the bytes; `pretrain --init-from english-compact` reads it back as float32 to
continue the language model). The model card (MODEL_CARD.md) is written by hand.
"""
import shutil
import sys
from pathlib import Path

import h5py

from spacy_elmo.output_files import atomic_output_path


def main(run_dir: Path, destination: Path) -> None:
    destination.mkdir(parents=True, exist_ok=True)
    for name in ("options.json", "weights.hdf5", "vocab.txt"):
        with atomic_output_path(destination / name) as tmp:
            shutil.copyfile(run_dir / name, tmp)
    with h5py.File(run_dir / "softmax.hdf5", "r") as source, atomic_output_path(destination / "softmax.hdf5") as tmp:
        with h5py.File(tmp, "w") as target:
            for name in ("softmax/W", "softmax/b"):
                target.create_dataset(name, data=source[name][()].astype("float16"))
    for path in sorted(destination.iterdir()):
        print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
