"""`albert-tf export`: a checkpoint -> BASE/NAME/VERSION/, a SavedModel TF Serving loads as is.

The command line, importing no TensorFlow: `parse` reads it, and only then does the CLI
import the export (`export.run_command`), so `albert-tf export --help` and a usage error
answer at once. What the export does: `export.py`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from albert_tf import precisions, tasks
from albert_tf.checkpoint.hub import CHECKPOINT_HELP
from albert_tf.config import DEFAULT_SEQ_LENGTH
from albert_tf.infra import arguments

from .options import FORMATS, QUANTIZE, Batching


def _precision(word: str) -> str:
    # The word with its alias resolved (auto -> as-trained); a usage error names the words.
    try:
        return precisions.export_precision(word, "")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parser() -> argparse.ArgumentParser:
    p = arguments.ArgumentParser(prog="albert-tf export", description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True,
                   help=f"{CHECKPOINT_HELP}; fine-tuned ones serve their heads")
    p.add_argument("--output", required=True, help="BASE/NAME; the version goes below it")
    p.add_argument("--version", type=int, help="version number (default: next free, from 1)")
    p.add_argument("--task", choices=tuple(tasks.ALL_TASKS), help="default: the checkpoint's task")
    p.add_argument("--seq-length", type=int, help="max tokens per request "
                   f"(default: the fine-tuning length, else {DEFAULT_SEQ_LENGTH} or "
                   "max_position_embeddings if fewer)")
    p.add_argument("--doc-stride", type=arguments.positive_int, help="span models: context pieces between "
                   "window starts (default: the task record's)")
    p.add_argument("--max-windows", type=arguments.positive_int, help="span models: the most windows a served "
                   "context may need; longer ones are refused (default: the task record's)")
    p.add_argument("--top-k", type=arguments.positive_int, metavar="N",
                   help="span models: answers listed per question beside the best (outputs "
                   "answers, answers_start_char, ... [B, N]; transformers' top_k; default: the "
                   "task record's, 1)")
    p.add_argument("--max-answer-len", type=arguments.positive_int, metavar="N",
                   help="span models: the longest answer in pieces (transformers' "
                   "max_answer_len; default: the task record's max_answer_length)")
    p.add_argument("--handle-impossible-answer", action=argparse.BooleanOptionalAction,
                   help="span models: the empty answer competes with the spans (a start/end "
                   "head: the [CLS] null score, threshold 0 unless the record has one); --no-: "
                   "never answer \"\" (default: the task record's rule; "
                   "docs/transformers-users.md)")
    p.add_argument("--spm-model", help="vocabulary if the checkpoint directory has none, or "
                   "its tokenizer.json over spiece.model / vocab.txt beside it: a SentencePiece "
                   ".model, a WordPiece vocab.txt or a tokenizer.json")
    p.add_argument("--token-ids-only", action="store_true",
                   help="only the token-id signature, for servers without tensorflow-text ops")
    p.add_argument("--precision", type=_precision, default=precisions.AS_TRAINED,
                   metavar="{" + ",".join(precisions.EXPORT_WORDS) + "}",
                   help="bfloat16: weights and matmuls in bfloat16 (faster on CPUs with "
                   "AVX-512 BF16 / AMX); as-trained (default): bfloat16 when the task record "
                   "says the model was trained in it, else float32")
    p.add_argument("--format", choices=FORMATS, default="savedmodel",
                   help="litert: --output is one .tflite file (raw text in, for phones and "
                   "edge devices; docs/on-device.md)")
    p.add_argument("--batching", action="store_true",
                   help="join concurrent requests into one batch inside the SavedModel "
                   "(TensorFlow's BatchFunction op; classification, regression, multiple "
                   "choice): for a server with many single-text clients; then leave TF "
                   "Serving's --enable_batching off (docs/serving.md)")
    p.add_argument("--batching-timeout-ms", type=float, default=Batching.timeout_ms,
                   help="with --batching: how long a request waits for others (default "
                   "%(default)s)")
    p.add_argument("--batching-max-size", type=int, default=Batching.max_batch_size,
                   help="with --batching: most rows in one joined batch (default %(default)s)")
    p.add_argument("--branches", type=int, default=1, metavar="N",
                   help="run each encoder sublayer as N independent branches (heads in groups, "
                   "the feed-forward in column blocks), so that one request uses N cores: "
                   "serve with --tensorflow_intra_op_parallelism=1 and "
                   "--tensorflow_inter_op_parallelism=<cores> (docs/serving.md; default 1)")
    p.add_argument("--quantize", choices=QUANTIZE, default="none",
                   help="litert only: float16 halves the weights, int8 (dynamic range) "
                   "quarters them")
    return p


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The command line, parsed (`--help` exits here; a usage error is a UsageError)."""
    return parser().parse_args(list(argv))
