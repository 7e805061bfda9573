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
import json
import logging
import os
import sys

from albert_tf.checkpoint import (CheckpointError, WEIGHTS_FILE, detect_format,
                                  load_checkpoint, read_task_info, save_checkpoint)
from albert_tf.checkpoint_readers import find_spm_model
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
    parser.add_argument("--task", choices=("regression", "multiple_choice"),
                        help="for a TF1 checkpoint whose output_weights [1, H] fit both "
                             "run_classifier's regression and run_race")
    return parser


# Record fields save_checkpoint takes as arguments (or decides itself); the rest of a
# foreign checkpoint's task record travels as extra fields.
_SAVED_FIELDS = ("task", "num_classes", "label_names", "do_lower_case", "seq_length",
                 "answerability")


def convert(src: str, dst: str, spm_model: str | None = None, cased: bool = False,
            force: bool = False, task: str | None = None) -> str:
    """Reads `src` (TF1 or Hugging Face, fine-tuned heads included) and writes it to
    `dst` in albert-tf's format, with its task record (label names, lowercasing, ...).

    `task` names the task of a TF1 checkpoint that fits two of the original scripts.
    """
    kind = detect_format(src)
    if os.path.isfile(os.path.join(dst, WEIGHTS_FILE)) and not force:
        raise FileExistsError(f"{dst} already holds a checkpoint; pass --force to overwrite it")
    if spm_model is not None and not os.path.isfile(spm_model):
        raise FileNotFoundError(f"--spm-model {spm_model}: no such file")
    spm_model = spm_model or find_spm_model(src)
    record = read_task_info(src, task)
    do_lower_case = not cased and record.get("do_lower_case", True)
    model = load_checkpoint(src, task)
    save_checkpoint(model, dst, spm_model=spm_model, label_names=record.get("label_names"),
                    do_lower_case=do_lower_case, seq_length=record.get("seq_length"),
                    extra_info={k: v for k, v in record.items() if k not in _SAVED_FIELDS})
    logger.info("converted %s checkpoint %s -> %s (%s, %d weights, SentencePiece model: %s, "
                "do_lower_case=%s)", kind, src, dst, model.task, len(model.weights),
                spm_model or "none found", do_lower_case)
    return dst


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = _parser().parse_args(argv)
        convert(args.src, args.dst, args.spm_model, args.cased, args.force, args.task)
    except (_UsageError, CheckpointError, ConfigError, FileExistsError,
            FileNotFoundError) as e:
        print(f"albert-tf convert: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
