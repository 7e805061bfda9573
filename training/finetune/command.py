"""`albert-tf finetune`: fine-tune a checkpoint on GLUE, SQuAD, RACE or your own files.

Tasks and their data (--data):
  glue/<task>   cola sst2 mrpc qqp stsb mnli qnli rte wnli: --data glue_data/ as GLUE's
                download_glue_data.py writes it (or one task's folder), read directly;
                without --data, from tensorflow-datasets (downloads on first use).
                Test predictions are written as GLUE submission files (CoLA.tsv,
                MNLI-m.tsv, MNLI-mm.tsv, AX.tsv, ...)
  squad/v1.1    SQuAD from tensorflow-datasets, or the official JSON files:
  squad/v2.0    --data DIR holding train-v2.0.json / dev-v2.0.json, or --data TRAIN DEV
  race          --data RACE (the released directory: train/dev/test/{middle,high}/*.txt)
  classification  your CSV / TSV / TXT / JSONL files: --data TRAIN [EVAL] and
  regression      --columns TEXT[,TEXT2][:LABEL] (LABEL defaults to "label"), header
                  names, or positions from 0 for files without a header (e.g. 3:1);
                  --label-names NEG,POS names the classes in id order
                  (classify and regress, their older names, are accepted too)
  ner           --data TRAIN [DEV [TEST]]: CoNLL-layout or JSONL files (or none:
                TensorFlow Datasets' conll2003); --label-names names the tags
Every task writes the evaluation metrics to OUTPUT/eval_results.json and the
evaluation predictions (predictions_<set>.tsv; SQuAD predictions.json; RACE
predictions_dev.tsv; NER predictions_<set>.txt in conlleval's WORD GOLD PRED
layout) so that a metric can be recomputed.

Defaults per task are the original ALBERT scripts' (run_glue.sh, README for SQuAD,
run_race.py); flags and --set KEY=VALUE override them. --set keys: train_steps,
warmup_steps, warmup_proportion, optimizer (adamw|lamb), weight_decay, eval_batch_size,
patience, seed, buckets (e.g. 32,64,128; none: every batch padded to --seq-length;
default: powers of two), jit_compile (true, false or auto), eval_jit_compile (false:
evaluation runs without XLA), spm_model, do_lower_case,
keep_accents; SQuAD: doc_stride, max_query_length, n_best, max_answer_length,
no_answer_threshold (2.0; default: tuned on the dev set); RACE: max_qa_length; NER:
tag_scheme. Values
are read by each setting's type (albert_tf.infra.arguments; "none" unsets an optional one,
NaN and infinities are refused); every number, flag or --set, is checked against its
range (TrainConfig) before any data is read. The settings used are saved in OUTPUT/albert_task.json
(the task record), which `albert-tf export` reads.

--output must not be, contain or lie inside --checkpoint or a --data path. An existing,
non-empty --output is refused unless --overwrite is given, and a directory holding
anything a fine-tuning run does not write is refused even then. Every run is written to a
hidden directory beside --output that becomes --output only when the run is complete
(replacing an existing one, with --overwrite, as a whole): a failed or interrupted run
leaves --output as it was, and of two runs started into the same --output one fails
at once (the output is claimed while a run writes it).

Example:
  albert-tf finetune --task glue/mrpc --data glue_data/ --checkpoint albert_base/ --output out/mrpc
  albert-tf finetune --task classification --checkpoint albert_base/ --output out/reviews \\
      --data train.csv dev.csv --columns review:sentiment --epochs 3
"""

from __future__ import annotations

import argparse

from albert_tf import precisions
from albert_tf.checkpoint.hub import CHECKPOINT_HELP
from albert_tf.infra import arguments

TASK_HELP = ("glue/<task>, squad/v1.1, squad/v2.0, race, classification, regression or ner "
             "(classify and regress: older names of classification and regression)")


def parser() -> argparse.ArgumentParser:
    p = arguments.ArgumentParser(prog="albert-tf finetune",
                                 description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    # The names of families.FAMILIES (a test keeps them equal; that module imports Keras).
    p.add_argument("--task", required=True, help=TASK_HELP)
    p.add_argument("--checkpoint", required=True,
                   help=f"what to start from: {CHECKPOINT_HELP}")
    p.add_argument("--output", "--output-dir", dest="output", required=True,
                   help="directory for the fine-tuned model")
    p.add_argument("--data", nargs="+", metavar="PATH", help="see the task list below")
    p.add_argument("--columns", help="TEXT[,TEXT2][:LABEL] for classification / regression: header "
                                     "names, or positions (from 0) in a file without a header")
    p.add_argument("--label-names", help="NAME,NAME,...: the classes of classification (or the "
                                         "tags of ner) in id order "
                                         "(the file's labels are these names or ids 0..K-1); "
                                         "predictions and the served model answer with them")
    p.add_argument("--epochs", type=int, help="passes over the training data (overrides the "
                                              "default number of steps)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--learning-rate", type=float)
    p.add_argument("--seq-length", type=int)
    p.add_argument("--gradient-accumulation-steps", type=int, metavar="N",
                   help="split each batch into N parts whose gradients make one update: "
                        "the same training in less memory (--batch-size must divide by N)")
    p.add_argument("--strategy", default="default",
                   help="default, cpu, mirrored, multi_worker, tpu or tpu:NAME")
    p.add_argument("--precision", default=precisions.AUTO,
                   help=precisions.listed(precisions.TRAINING_WORDS))
    p.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                   help="other hyperparameters (see below)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --output (only once the new run is complete)")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line, parsed (`--help` exits here; a usage error is a UsageError).
    It imports no TensorFlow: the CLI imports the job (`run.run_command`) only after it."""
    return parser().parse_args(argv)
