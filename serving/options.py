"""The choices `albert-tf export` offers, as plain data (no TensorFlow): read by the command
line (`export_command`) and by the export itself, so `export --help` imports nothing heavy.

  (--precision's words: albert_tf.precisions, the one home of every precision word)
  FORMATS            --format: a SavedModel directory, or one LiteRT .tflite file
  QUANTIZE           --quantize (LiteRT): the weights' storage
  Batching           --batching: in-graph batching of concurrent requests
"""

from __future__ import annotations

import dataclasses

FORMATS = ("savedmodel", "litert")
QUANTIZE = ("none", "float16", "int8")


@dataclasses.dataclass(frozen=True)
class Batching:
    """In-graph batching of concurrent requests (`export --batching`): the model call of
    every signature goes through TensorFlow's BatchFunction op, which joins the rows of
    calls that arrive within `timeout_ms` of each other (up to `max_batch_size` rows) and
    runs them as one batch on `threads` threads. Each request's rows are padded to the
    export's sequence length to be joined, and the joined batch is run in length groups
    (`signatures.base.run_by_length`), so a long request does not make short ones pay for
    its length."""

    max_batch_size: int = 32
    timeout_ms: float = 2.0
    threads: int = 1
    max_enqueued_batches: int = 100

    def as_record(self) -> dict:
        return dataclasses.asdict(self)
