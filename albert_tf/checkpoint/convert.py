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
import logging
import os

from albert_tf import arguments, cli, errors
from albert_tf.checkpoint.formats import open_checkpoint
from albert_tf.checkpoint.ours import WEIGHTS_FILE, save_checkpoint
from albert_tf.tokenizer.spm import AlbertTokenizer

__all__ = ["convert", "main"]

logger = logging.getLogger("albert_tf.convert")


def _parser() -> argparse.ArgumentParser:
    parser = arguments.ArgumentParser(prog="albert-tf convert", description=__doc__.splitlines()[0],
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
                 "answerability", "start_n_top", "end_n_top", "precision")


def convert(src: str, dst: str, spm_model: str | None = None, cased: bool = False,
            force: bool = False, task: str | None = None) -> str:
    """Reads `src` (TF1 or Hugging Face, fine-tuned heads included) and writes it to
    `dst` in albert-tf's format, with its task record (label names, lowercasing, ...).

    `task` names the task of a TF1 checkpoint that fits two of the original scripts.
    """
    source = open_checkpoint(src, task)
    if os.path.isfile(os.path.join(dst, WEIGHTS_FILE)) and not force:
        raise errors.UserError(f"{dst} already holds a checkpoint; pass --force to overwrite it")
    if spm_model is not None and not os.path.isfile(spm_model):
        raise errors.UserError(f"--spm-model {spm_model}: no such file")
    tokenizer = source.tokenizer_files(spm_model, False if cased else None)
    spm_model, do_lower_case = tokenizer.spm_model, tokenizer.do_lower_case
    if spm_model is not None:  # before the weights: a wrong vocabulary fails fast
        _check_vocab_size(spm_model, source.config.vocab_size, src)
    record = source.task_record.to_dict()
    model = source.load()
    save_checkpoint(model, dst, spm_model=spm_model, label_names=record.get("label_names"),
                    do_lower_case=do_lower_case, seq_length=record.get("seq_length"),
                    extra_info={k: v for k, v in record.items() if k not in _SAVED_FIELDS})
    logger.info("converted %s checkpoint %s -> %s (%s, %d weights, SentencePiece model: %s, "
                "do_lower_case=%s)", source.format, src, dst, model.task, len(model.weights),
                spm_model or "none found", do_lower_case)
    return dst


def _check_vocab_size(spm_model: str, vocab_size: int, src: str) -> None:
    """A SentencePiece model whose size is not the embedding table's is the wrong one."""
    pieces = AlbertTokenizer(spm_model).vocab_size
    if pieces != vocab_size:
        raise errors.UserError(f"SentencePiece model {spm_model} has {pieces} pieces but the "
                              f"checkpoint {src} has vocab_size={vocab_size}; pass the "
                              "model's own vocabulary with --spm-model")


@cli.command("convert")
def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    cli.setup_logging()
    convert(args.src, args.dst, args.spm_model, args.cased, args.force, args.task)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
