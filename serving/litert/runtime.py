"""Running a .tflite file from Python: LiteRT's interpreter with TF-Text's kernels.

`open_interpreter(path)` is LiteRT's interpreter (`tf.lite`'s `InterpreterWithCustomOps`)
with tensorflow-text's registrar (`SELECT_TFTEXT_OPS`), which the text signatures need for
`FastSentencepieceTokenize`;
`call(interpreter, signature, **inputs)` runs one signature on NumPy inputs (strings as
bytes). The `token_ids` signature needs no TF-Text kernel: `ai_edge_litert`'s
interpreter runs it without TensorFlow (docs/on-device.md).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

# The kernels tensorflow-text ships for LiteRT (tflite_registrar's Add* functions).
TFTEXT_KERNELS = tuple(sorted(
    "TFText>" + name[len("Add"):] for name in dir(tf_text.tflite_registrar)
    if name.startswith("Add")))


def open_interpreter(model: str | bytes, num_threads: int | None = None) -> tf.lite.Interpreter:
    """A LiteRT interpreter for a .tflite path (or its bytes), TF-Text's kernels registered."""
    source = {"model_content": model} if isinstance(model, bytes) else {"model_path": model}
    return InterpreterWithCustomOps(
        **source, num_threads=num_threads,
        custom_op_registerers=list(tf_text.tflite_registrar.SELECT_TFTEXT_OPS))


def call(interpreter: tf.lite.Interpreter, signature: str, **inputs) -> dict[str, np.ndarray]:
    """Runs `signature` on `inputs` (NumPy arrays; text as bytes); {output name: array}."""
    runner = interpreter.get_signature_runner(signature)
    return runner(**{name: np.asarray(value) for name, value in inputs.items()})


def strings(texts) -> np.ndarray:
    """Text (a list, or nested lists for [B, K] inputs) as a NumPy array of UTF-8 bytes."""
    array = np.array(texts, dtype=object)
    flat = [t.encode("utf-8") if isinstance(t, str) else t for t in array.reshape(-1)]
    return np.array(flat, dtype=object).reshape(array.shape)


def signature_ops(flatbuffer: bytes) -> dict[str, dict[str, list[str]]]:
    """{signature name: {"builtin": [...], "custom": [...]}}: the sorted names of the ops
    each signature's subgraph runs in a .tflite file.

    Builtins by their schema names (FULLY_CONNECTED, ...), custom ops by their custom
    code (TFText>FastSentencepieceTokenize; an op the converter could not lower keeps
    its TensorFlow name, e.g. StridedSlice, and Flex... names select TensorFlow ops).
    """
    model = schema.Model.GetRootAs(flatbuffer, 0)
    names = {value: name for name, value in vars(schema.BuiltinOperator).items()
             if not name.startswith("_")}
    codes = []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == schema.BuiltinOperator.CUSTOM:
            codes.append(("custom", code.CustomCode().decode()))
        else:
            codes.append(("builtin", names.get(builtin, str(builtin))))
    ops = {}
    for i in range(model.SignatureDefsLength()):
        definition = model.SignatureDefs(i)
        graph = model.Subgraphs(definition.SubgraphIndex())
        used = {codes[graph.Operators(j).OpcodeIndex()] for j in range(graph.OperatorsLength())}
        ops[definition.SignatureKey().decode()] = {
            kind: sorted(name for k, name in used if k == kind) for kind in ("builtin", "custom")}
    return ops
