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

from albert_tf.errors import UserError

# The kernels tensorflow-text ships for LiteRT (tflite_registrar's Add* functions): most
# register as "TFText>" + the function's name; the WordPiece tokenizer's two under their
# TensorFlow ops' names (the kernel templates' OpName), which the converter writes.
_OWN_NAMES = {"AddFastBertNormalize": "FastBertNormalize",
              "AddFastWordpieceTokenize": "FastWordpieceTokenizeWithOffsets"}
TFTEXT_KERNELS = tuple(sorted(
    _OWN_NAMES.get(name, "TFText>" + name[len("Add"):]) for name in dir(tf_text.tflite_registrar)
    if name.startswith("Add")))


def open_interpreter(model: str | bytes, num_threads: int | None = None) -> tf.lite.Interpreter:
    """A LiteRT interpreter for a .tflite path (or its bytes), TF-Text's kernels registered."""
    source = {"model_content": model} if isinstance(model, bytes) else {"model_path": model}
    return InterpreterWithCustomOps(
        **source, num_threads=num_threads,
        custom_op_registerers=list(tf_text.tflite_registrar.SELECT_TFTEXT_OPS))


class LiteRequestError(UserError):
    """A request a .tflite signature refuses (as the SavedModel's), named in one line."""


# The rank each input of the served signatures takes (the SavedModel's TensorSpecs);
# multiple choice's options and token_ids are one rank more ([B, K], [B, K, T]).
_RANKS = {"text": 1, "text_a": 1, "text_b": 1, "context": 1, "options": 2,
          "input_word_ids": 2, "input_mask": 2, "input_type_ids": 2}


def check_request(signature: str, inputs: dict[str, np.ndarray], choices: bool = False) -> None:
    """The SavedModel's checks on a request, before LiteRT runs it: each input's rank,
    the batch sizes of a pair (and contexts and options) agree, the three token-id
    inputs have one shape and no negative id. (Ids past the vocabulary fail in the
    graph: `text_graph.guard`.)

    Raises:
      LiteRequestError: "SIG: text has rank 2 but the signature takes rank 1", ...
    """
    extra = 1 if choices and "input_word_ids" in inputs else 0
    for name, value in inputs.items():
        want = _RANKS.get(name)
        if want is not None and value.ndim != want + extra:
            raise LiteRequestError(f"{signature}: {name} has rank {value.ndim} but the "
                                   f"signature takes rank {want + extra}")
    names = list(inputs)
    if "input_word_ids" in inputs:
        for name in names[1:]:
            if inputs[name].shape != inputs[names[0]].shape:
                raise LiteRequestError(f"{signature}: {names[0]} has shape "
                                       f"{list(inputs[names[0]].shape)} but {name} has shape "
                                       f"{list(inputs[name].shape)}")
        for name in names:
            if inputs[name].size and inputs[name].min() < 0:
                raise LiteRequestError(f"{signature}: {name} holds {inputs[name].min()}; ids "
                                       "are never negative")
    elif len(names) > 1 and len({len(inputs[name]) for name in names}) > 1:
        rows = ", ".join(f"{name} has {len(inputs[name])}" for name in names)
        raise LiteRequestError(f"{signature}: the inputs disagree on the batch size ({rows} "
                               "rows)")


def call(interpreter: tf.lite.Interpreter, signature: str, **inputs) -> dict[str, np.ndarray]:
    """Runs `signature` on `inputs` (NumPy arrays; text as bytes); {output name: array}.

    The request is checked first (`check_request`); a request the graph's own guard
    refuses (an id past the vocabulary) is one LiteRequestError naming the signature.
    """
    arrays = {name: np.asarray(value) for name, value in inputs.items()}
    choices = "options" in interpreter.get_signature_list().get("serving_default", {}).get(
        "inputs", [])
    check_request(signature, arrays, choices)
    runner = interpreter.get_signature_runner(signature)
    try:
        return runner(**arrays)
    except RuntimeError as e:
        if "gather index out of bounds" not in str(e):
            raise
        raise LiteRequestError(f"{signature}: the request does not fit the signature (a token "
                               "id outside the vocabulary, a type id outside the type "
                               "vocabulary or a mask value other than 0/1)") from None


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
