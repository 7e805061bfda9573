"""`albert-tf export --format litert`: a checkpoint -> one .tflite file, raw text in.

The task's `LiteModule` (`tasks.py`) is saved as a SavedModel in a temporary
directory (`modules.write_signatures`: exactly the variables the signatures use) and
converted by `tf.lite.TFLiteConverter` to LiteRT builtins plus tensorflow-text's
`FastSentencepieceTokenize`; no select TensorFlow (Flex) op, which TensorFlow's
LiteRT runtime does not ship. Quantization: none (float32), float16 (weights), int8
(dynamic range: int8 weights, activations quantized per call).

The parity gate: the written file is loaded in LiteRT's interpreter with TF-Text's
kernels and every text signature is called on `PARITY_TEXTS`; the Keras model, fed
by the Python tokenizer (`AlbertTokenizer.encode_pair`), gives the reference through
the module's own read-out. A float32 file whose outputs differ by more than
`FLOAT_TOLERANCE`, or whose labels or top-k ids differ, is refused and not left
behind; float16 and int8 files report top-1 agreement and the largest difference.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile

import numpy as np
import tensorflow as tf

from albert_tf.errors import UserError
from albert_tf.infra import atomic

from ..modules import write_signatures
from ..options import QUANTIZE
from . import runtime
from .tasks import lite_module
from .wordpiece_model import LiteWordPieceError

logger = logging.getLogger(__name__)

FLOAT_TOLERANCE = 1e-4
# What the gate asks every text signature: empty text, accents, digits with commas,
# case, other scripts, a long text.
# No word ends in a capital sigma: str.lower's final-sigma rule is the tokenizers' known
# difference in LiteRT (spm_model's and wordpiece_model's docstrings), not a fault to gate.
PARITY_TEXTS = ["", "The quick brown fox jumps over the lazy dog.",
                "Crème brûlée à Zürich: naïve café, São Paulo",
                "It costs 1,000,000, then 2,500, ok?",
                "ÉCOLE Ünïcödé MIXED Case Words", "日本語のテキスト 😀 ΑΘΗΝΑ",
                "tab\there  and   spaces\n", "A longer request, with more words. " * 30]
FILL_MASK_TEXTS = ["The [MASK] sat on the [MASK].", "[MASK]", "no mask here", "",
                   "It costs 1,[MASK], Crème [MASK]"]
TOP1_OUTPUTS = ("label_id", "top_k_ids", "choice")  # reported as top-1 agreement


class LiteRTError(UserError):
    """A checkpoint that cannot be written as a faithful .tflite file (one line)."""


@dataclasses.dataclass(frozen=True)
class ParityReport:
    """What the gate measured: per signature and output, the largest |difference|
    (float outputs), and the share of rows whose label / top-1 id agrees."""

    quantize: str
    max_diff: dict[str, float]
    agreement: dict[str, float]

    def summary(self) -> str:
        parts = [f"{name} max |Δ| {value:.2g}" for name, value in self.max_diff.items()]
        parts += [f"{name} top-1 agreement {value:.3f}" for name, value in self.agreement.items()]
        return "; ".join(parts)


def convert(module, quantize: str) -> bytes:
    """The module's signatures as a .tflite flatbuffer (builtins + TF-Text ops)."""
    functions = module.signatures()
    with tempfile.TemporaryDirectory() as directory:
        write_signatures(functions, directory)
        converter = tf.lite.TFLiteConverter.from_saved_model(directory,
                                                             signature_keys=list(functions))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.allow_custom_ops = True  # tensorflow-text's, checked by `check_ops`
        if quantize != "none":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "float16":
            converter.target_spec.supported_types = [tf.float16]
        try:
            return converter.convert()
        except Exception as e:  # the converter raises ConverterError and plain ones alike
            line = next((s for s in str(e).splitlines() if "error" in s.lower()), str(e))
            raise LiteRTError(f"the LiteRT converter failed: {line.strip()[:300]}") from None


def check_ops(flatbuffer: bytes) -> dict[str, dict[str, list[str]]]:
    """Refuses an op no LiteRT runtime has (Flex, or any custom op but TF-Text's
    kernels), and a `token_ids` signature with any custom op; returns the ops."""
    ops = runtime.signature_ops(flatbuffer)
    for signature, used in ops.items():
        unknown = [name for name in used["custom"] if name not in runtime.TFTEXT_KERNELS]
        if unknown:
            raise LiteRTError(f"signature {signature} needs {', '.join(unknown)}, which no "
                              "LiteRT kernel implements (select TensorFlow ops are not shipped)")
        if signature == "token_ids" and used["custom"]:
            raise LiteRTError(f"signature token_ids needs {', '.join(used['custom'])}; it must "
                              "run on LiteRT builtins alone")
    return ops


def parity_gate(path: str, module, quantize: str) -> ParityReport:
    """Calls the file at `path` on PARITY_TEXTS (and FILL_MASK_TEXTS) and compares it with
    the Keras model on the Python tokenizer's ids; raises LiteRTError for a float file
    that disagrees."""
    interpreter = runtime.open_interpreter(path)
    cases = module.parity_cases(PARITY_TEXTS, FILL_MASK_TEXTS)
    max_diff, agreement, wrong = {}, {}, []
    for signature, inputs, features, readout in cases:
        got = runtime.call(interpreter, signature,
                           **{name: runtime.strings(texts) for name, texts in inputs.items()})
        want = {name: value.numpy() for name, value in readout(features).items()}
        for name, expected in want.items():
            actual = got[name]
            key = f"{signature}.{name}"
            if actual.shape != expected.shape:
                wrong.append(f"{key} has shape {actual.shape}, the Keras model's {expected.shape}")
            elif expected.dtype.kind == "f":
                max_diff[key] = float(np.max(np.abs(actual - expected), initial=0.0))
            elif name in TOP1_OUTPUTS:
                top = (actual[..., 0] == expected[..., 0]) if name == "top_k_ids" else (
                    actual == expected)
                agreement[key] = float(np.mean(top)) if top.size else 1.0
                if quantize == "none" and not np.array_equal(actual, expected):
                    wrong.append(f"{key} differs from the Keras model's")
            elif quantize == "none" and not np.array_equal(actual, expected):
                wrong.append(f"{key} differs from the Keras model's")
    report = ParityReport(quantize, max_diff, agreement)
    if quantize == "none":
        wrong += [f"{key} differs by {value:.3g} > {FLOAT_TOLERANCE}"
                  for key, value in max_diff.items() if value > FLOAT_TOLERANCE]
    if wrong:
        raise LiteRTError(f"the .tflite file disagrees with the Keras model: {wrong[0]}; "
                          "nothing was written")
    return report


def write_litert(model, tokenizer, record, output: str, task: str, seq_length: int,
                 quantize: str = "none") -> ParityReport:
    """Writes `model` as the .tflite file `output` (atomically, only once the gate passed).

    Args:
      model: the Keras model; tokenizer: its Python tokenizer (`AlbertTokenizer` or
        `WordPieceTokenizer`, with the task record's options); record: its `TaskRecord`.
      output: the file to write.
      task: "encoder" or the model's task (a key of `tasks.LITE_TASKS`).
      seq_length: the most tokens per row.
      quantize: none, float16 or int8.

    Returns: the parity gate's `ParityReport`.
    """
    if quantize not in QUANTIZE:
        raise LiteRTError(f"--quantize {quantize!r}: expected one of {', '.join(QUANTIZE)}")
    try:
        module = lite_module(model, tokenizer, seq_length, record, task)
    except (ValueError, LiteWordPieceError) as e:
        raise LiteRTError(f"cannot write {task} as LiteRT: {e}") from None
    flatbuffer = convert(module, quantize)
    ops = check_ops(flatbuffer)
    # A .tflite export never replaces a file: the final name is taken exclusively at the
    # rename, so a file that appeared meanwhile or a concurrent export is refused.
    with atomic.atomic_path(output, replace=False) as tmp:
        with open(tmp, "wb") as f:
            f.write(flatbuffer)
        report = parity_gate(tmp, module, quantize)
    custom = sorted({op for used in ops.values() for op in used["custom"]})
    logger.info("wrote %s (%s, %s, seq_length %d, %.1f MB); custom ops: %s; parity with the "
                "Keras model: %s", output, task, quantize, seq_length,
                os.path.getsize(output) / 1e6, ", ".join(custom) or "none", report.summary())
    return report
