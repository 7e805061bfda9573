"""`albert-tf convert SRC DST`: an ALBERT checkpoint of any format it reads -> albert-tf's format.

SRC is an original google-research checkpoint (a directory with albert_config.json
and model.ckpt-*, or a checkpoint prefix), a Hugging Face ALBERT directory
(config.json + model.safetensors or pytorch_model.bin), a KerasHub preset, a TF Model
Garden TF2 checkpoint, a TF-Hub SavedModel or an albert-tf directory. DST receives
albert_config.json, model.weights.h5, albert_task.json and, when one is found or
given, the SentencePiece model as spiece.model (its size must be the model's
vocab_size). DST must be new or empty; --overwrite replaces a DST that holds a
checkpoint, as a whole (nothing of the old one survives), and refuses one that
holds other files, naming them. DST may not be, contain or lie inside SRC.

--to hf writes a Hugging Face directory (config.json, model.safetensors, spiece.model,
tokenizer_config.json) and --to kerashub a KerasHub preset, from any format SRC is in;
a head the target cannot hold is refused, naming it (--encoder-only writes the encoder
alone: HF's AlbertModel, KerasHub's backbone).

Example:
    albert-tf convert albert_base/ albert_base_tf/
    albert-tf convert ~/hf/albert-base-v2 albert_base_tf/ --cased
    albert-tf convert runs/sst2 sst2_hf/ --to hf
    albert-tf convert albert_base/ albert_base_kerashub/ --to kerashub --encoder-only
"""

from __future__ import annotations

import argparse
import logging
import os

from albert_tf import errors
from albert_tf.checkpoint.formats import open_checkpoint
from albert_tf.checkpoint.hub import CHECKPOINT_HELP
from albert_tf.checkpoint.ours import check_replaceable, save_checkpoint
from albert_tf.checkpoint.writers import TARGETS, WRITERS, check_destination, check_target
from albert_tf.infra import arguments, atomic, cli
from albert_tf.tasks import TF1_ONE_OUTPUT_TASKS

__all__ = ["convert", "main"]

logger = logging.getLogger("albert_tf.convert")


def _parser() -> argparse.ArgumentParser:
    parser = arguments.ArgumentParser(prog="albert-tf convert", description=__doc__.splitlines()[0],
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("src", help=f"what to convert: {CHECKPOINT_HELP} (or a TF1 "
                                    "checkpoint prefix)")
    parser.add_argument("dst", help="output directory (albert-tf format)")
    parser.add_argument("--spm-model", help="vocabulary to include: a SentencePiece .model, a "
                                            "WordPiece vocab.txt or a tokenizer.json (default: the one beside SRC)")
    parser.add_argument("--cased", action="store_true",
                        help="the vocabulary is cased: do not lower-case text")
    parser.add_argument("--overwrite", "--force", dest="force", action="store_true",
                        help="replace the checkpoint in DST (as a whole)")
    parser.add_argument("--task", choices=TF1_ONE_OUTPUT_TASKS,
                        help="for a TF1 checkpoint whose output_weights [1, H] fit both "
                             "run_classifier's regression and run_race")
    parser.add_argument("--to", choices=TARGETS, default="albert-tf",
                        help="the format DST is written in (default: %(default)s)")
    parser.add_argument("--encoder-only", action="store_true",
                        help="with --to hf or kerashub: write the encoder alone, without heads")
    return parser


# Record fields save_checkpoint takes as arguments (or decides itself); the rest of a
# foreign checkpoint's task record travels as extra fields.
_SAVED_FIELDS = ("task", "num_classes", "label_names", "do_lower_case", "seq_length",
                 "answerability", "start_n_top", "end_n_top", "mlm_layer_norm_epsilon",
                 "precision")


def convert(src: str, dst: str, spm_model: str | None = None, cased: bool = False,
            force: bool = False, task: str | None = None, to: str = "albert-tf",
            encoder_only: bool = False) -> str:
    """Reads `src` (any format `open_checkpoint` reads, fine-tuned heads included) and
    writes it to `dst` in albert-tf's format, with its task record (label names,
    lowercasing, ...), or as `to` ("hf", "kerashub": `writers.py`).

    `task` names the task of a TF1 checkpoint that fits two of the original scripts.
    """
    source = open_checkpoint(src, task)
    atomic.check_not_input(dst, [("checkpoint directory", source.directory)], "DST",
                           "converting would overwrite the checkpoint it reads")
    check_target(to, source.config, source.task_record, encoder_only, src)
    if source.task_record.seq_length is not None:  # the length rule, before any weight is read
        source.config.check_sequence_length(source.task_record.seq_length,
                                            where=f"the task record of {src}")
    if to == "albert-tf":
        _check_destination(dst, force)
    else:
        check_destination(to, dst, force)
    if spm_model is not None and not os.path.isfile(spm_model):
        raise errors.UserError(f"--spm-model {spm_model}: no such file")
    # Checks the vocabulary's size against the config: before the weights are read.
    tokenizer = source.tokenizer_files(spm_model, False if cased else None)
    spm_model, do_lower_case = tokenizer.spm_model, tokenizer.do_lower_case
    record = source.task_record.to_dict()
    model = source.load()
    if to != "albert-tf":
        WRITERS[to](model, dst, tokenizer, source.task_record, force, encoder_only)
        return dst
    save_checkpoint(model, dst, spm_model=spm_model, label_names=record.get("label_names"),
                    do_lower_case=do_lower_case, seq_length=record.get("seq_length"),
                    extra_info={k: v for k, v in record.items() if k not in _SAVED_FIELDS},
                    overwrite=force)  # without --overwrite, a DST that appeared meanwhile is kept
    logger.info("converted %s checkpoint %s -> %s (%s, %d weights, SentencePiece model: %s, "
                "do_lower_case=%s)", source.format, src, dst, model.task, len(model.weights),
                spm_model or "none found", do_lower_case)
    return dst


def _check_destination(dst: str, force: bool) -> None:
    """Refuses, before any work, a DST that is not new or empty, unless --overwrite is
    given and DST holds only what a checkpoint writes (the one rule,
    `atomic.check_replaceable`)."""
    check_replaceable(dst, replace=force, flag="--overwrite")


@cli.command("convert")
def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    cli.setup_logging()
    convert(args.src, args.dst, args.spm_model, args.cased, args.force, args.task, args.to,
            args.encoder_only)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
