"""`albert-tf`: one console script, one subcommand per job.

Each subcommand lives in its own module with a `main(argv)`; this file only
dispatches, importing the module when its command is run so that `albert-tf
params` does not pay for TensorFlow's start-up.
"""

from __future__ import annotations

import importlib
import os
import sys

from albert_tf import runio

COMMANDS = {
    # name: (module, one-line help)
    "demo": ("albert_tf.training.demo", "the whole job on the embedded corpus: vocab -> data -> pretrain -> export -> answers"),
    "vocab": ("albert_tf.training.vocab", "train a SentencePiece vocabulary with ALBERT's conventions"),
    "create-data": ("albert_tf.training.pretraining_data", "write SOP (or NSP) + n-gram-masked pretraining TFRecords"),
    "pretrain": ("albert_tf.training.pretrain", "pretrain with model.fit under a distribution strategy"),
    "finetune": ("albert_tf.training.finetune.run", "fine-tune on GLUE, SQuAD, RACE or your own files"),
    "export": ("albert_tf.serving.export", "export a SavedModel with raw-text signatures for TF Serving"),
    "predict": ("albert_tf.serving.client", "query TF Serving (REST/gRPC) or a local SavedModel"),
    "convert": ("albert_tf.training.convert", "convert a TF1 or Hugging Face checkpoint to albert-tf's format"),
    "params": ("albert_tf.training.params", "print parameter counts of the paper's configurations"),
    "ablate": ("albert_tf.training.ablate", "rerun the paper's ablations (sharing, E, NSP/SOP, dropout): tables + plots"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: albert-tf COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run 'albert-tf COMMAND --help' for a command's options.",
              "--debug (anywhere): show the traceback of an error instead of one line."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--debug" in argv:
        argv = [a for a in argv if a != "--debug"]
        runio.set_debug(True)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"albert-tf: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    # TensorFlow's C++ start-up chatter (oneDNN, CUDA probes) is not for command-line users.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Every command reports errors the same way: one line (see runio.command).
    return runio.command(command)(_run)(COMMANDS[command][0], rest)


def _run(module_name: str, argv: list[str]) -> int:
    return int(importlib.import_module(module_name).main(argv) or 0)


if __name__ == "__main__":
    sys.exit(main())
