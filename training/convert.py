"""`albert-tf convert SRC DST`: a TF1 or Hugging Face ALBERT checkpoint -> albert-tf's format.

SRC is an original google-research checkpoint (a directory with albert_config.json
and model.ckpt-*, or a checkpoint prefix) or a Hugging Face ALBERT directory
(config.json + model.safetensors or pytorch_model.bin). DST receives
albert_config.json, model.weights.h5, albert_task.json and, when one is found or
given, the SentencePiece model as spiece.model.

Example:
    albert-tf convert albert_base/ albert_base_tf/
    albert-tf convert ~/hf/albert-base-v2 albert_base_tf/ --cased
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import sys

from albert_tf.checkpoint import (CheckpointError, SPM_FILE, WEIGHTS_FILE, detect_format,
                                  load_checkpoint, save_checkpoint)
from albert_tf.checkpoint_readers import tf1_prefix
from albert_tf.config import ConfigError

logger = logging.getLogger("albert_tf.convert")


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and status 2, not argparse's usage dump
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="albert-tf convert", description=__doc__.splitlines()[0],
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("src", help="TF1 checkpoint directory or prefix, or a Hugging Face "
                                    "ALBERT directory")
    parser.add_argument("dst", help="output directory (albert-tf format)")
    parser.add_argument("--spm-model", help="SentencePiece model to include (default: "
                                            "spiece.model or the one *.model beside SRC)")
    parser.add_argument("--cased", action="store_true",
                        help="the vocabulary is cased: do not lower-case text")
    parser.add_argument("--force", action="store_true", help="overwrite a checkpoint in DST")
    return parser


def find_spm_model(src: str) -> str | None:
    """The SentencePiece model shipped with a checkpoint: spiece.model (Hugging Face) or
    the single *.model file beside a TF1 checkpoint (e.g. 30k-clean.model)."""
    directory = src if os.path.isdir(src) else os.path.dirname(tf1_prefix(src) or src)
    named = os.path.join(directory, SPM_FILE)
    if os.path.isfile(named):
        return named
    candidates = sorted(glob.glob(os.path.join(directory, "*.model")))
    if len(candidates) > 1:
        logger.warning("several SentencePiece models beside %s (%s); pass --spm-model",
                       src, ", ".join(candidates))
    return candidates[0] if len(candidates) == 1 else None


def hf_do_lower_case(src: str) -> bool | None:
    """do_lower_case from a Hugging Face tokenizer_config.json, if there is one."""
    path = os.path.join(src, "tokenizer_config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        value = json.load(f).get("do_lower_case")
    return None if value is None else bool(value)


def convert(src: str, dst: str, spm_model: str | None = None, cased: bool = False,
            force: bool = False) -> str:
    """Reads `src` (TF1 or Hugging Face) and writes it to `dst` in albert-tf's format."""
    kind = detect_format(src)
    if os.path.isfile(os.path.join(dst, WEIGHTS_FILE)) and not force:
        raise FileExistsError(f"{dst} already holds a checkpoint; pass --force to overwrite it")
    if spm_model is not None and not os.path.isfile(spm_model):
        raise FileNotFoundError(f"--spm-model {spm_model}: no such file")
    spm_model = spm_model or find_spm_model(src)
    lower = hf_do_lower_case(src) if kind == "hf" else None
    do_lower_case = not cased and lower is not False
    model = load_checkpoint(src)
    save_checkpoint(model, dst, spm_model=spm_model, do_lower_case=do_lower_case)
    logger.info("converted %s checkpoint %s -> %s (%d weights, SentencePiece model: %s, "
                "do_lower_case=%s)", kind, src, dst, len(model.weights),
                spm_model or "none found", do_lower_case)
    return dst


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = _parser().parse_args(argv)
        convert(args.src, args.dst, args.spm_model, args.cased, args.force)
    except (_UsageError, CheckpointError, ConfigError, FileExistsError,
            FileNotFoundError) as e:
        print(f"albert-tf convert: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
