"""The stacks a user would serve an ALBERT classifier with instead of ours, from raw text.

Each stack is a callable `texts -> probabilities [B, C]` (NumPy) built from the same
weights, a Hugging Face ALBERT directory written by `albert-tf convert --to hf`:

* `transformers_stack`: transformers' AlbertForSequenceClassification in PyTorch (eager,
  inference mode), fed by its own tokenizer (`AutoTokenizer`, padding to the longest text);
* `onnx_stack`: the same PyTorch module exported to ONNX (`torch.onnx.export`, dynamic
  batch and sequence axes) and run by ONNX Runtime's CPU provider with its default
  graph optimizations, fed by the same Hugging Face tokenizer.

In one process whose calls take turns, a runtime whose idle threads spin-wait takes the
cores from the next runtime's call: ONNX Runtime's intra-op threads are told not to spin
(unless `spinning`), and the benchmark sets OMP_WAIT_POLICY=PASSIVE for PyTorch's OpenMP
threads before torch is imported.

Used by bench_serving.py; install the peers with `pip install -e .[bench]` (a CPU build
of torch first: docs/benchmarks.md).
"""

from __future__ import annotations

import os

import numpy as np


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def hf_tokenizer(hf_dir: str, seq_length: int):
    """texts -> {"input_ids", "attention_mask", "token_type_ids"} int64 arrays, padded to the
    longest text and truncated to `seq_length`, by transformers' tokenizer for `hf_dir`."""
    import sentencepiece
    from transformers import AlbertTokenizer

    # transformers reads spiece.model through sentencepiece's protobuf module, whose
    # generated code can need a newer protobuf than TensorFlow allows; the pieces and
    # scores read by sentencepiece itself build the same Unigram tokenizer.
    processor = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(hf_dir, "spiece.model"))
    vocab = [(processor.id_to_piece(i), processor.get_score(i))
             for i in range(processor.get_piece_size())]
    tokenizer = AlbertTokenizer(vocab=vocab)

    def encode(texts: list[str]) -> dict[str, np.ndarray]:
        return dict(tokenizer(texts, padding=True, truncation=True, max_length=seq_length,
                              return_tensors="np"))
    return encode


def same_tokens(hf_dir: str, ours, texts: list[str], seq_length: int) -> list[bool]:
    """Per text: does transformers' tokenizer give the ids our `AlbertTokenizer` gives?

    transformers' ALBERT tokenizer (the `tokenizers` library) splits a punctuation mark
    after a space differently from SentencePiece for some vocabularies ('▁', '"',
    'assert' vs '"', '▁assert'); ours follows SentencePiece, as the original does.
    """
    encode = hf_tokenizer(hf_dir, seq_length)
    flags = []
    for text in texts:
        row = ours.encode_pair(text, None, seq_length)
        mine = [i for i, m in zip(row["input_word_ids"], row["input_mask"]) if m]
        flags.append(encode([text])["input_ids"][0].tolist() == mine)
    return flags


def transformers_stack(hf_dir: str, seq_length: int):
    import torch
    from transformers import AlbertForSequenceClassification

    model = AlbertForSequenceClassification.from_pretrained(hf_dir).eval()
    encode = hf_tokenizer(hf_dir, seq_length)

    def run(texts: list[str]) -> np.ndarray:
        features = {k: torch.from_numpy(v) for k, v in encode(texts).items()}
        with torch.inference_mode():
            return softmax(model(**features).logits.numpy())
    return run


def export_onnx(hf_dir: str, path: str) -> str:
    """`hf_dir`'s classifier as an ONNX graph at `path`, dynamic batch and sequence axes."""
    import torch
    from transformers import AlbertForSequenceClassification

    model = AlbertForSequenceClassification.from_pretrained(hf_dir).eval()
    model.config.return_dict = False
    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = tuple(torch.ones((2, 16), dtype=torch.int64) for _ in names)
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    axes["logits"] = {0: "batch"}
    with torch.inference_mode():
        torch.onnx.export(model, example, path, input_names=names, output_names=["logits"],
                          dynamic_axes=axes, opset_version=17, dynamo=False)
    return path


def onnx_stack(hf_dir: str, seq_length: int, folder: str, spinning: bool = False):
    return onnx_session_stack(hf_dir, export_onnx(hf_dir, os.path.join(folder, "albert.onnx")),
                              seq_length, spinning=spinning)


def onnx_session_stack(hf_dir: str, onnx_path: str, seq_length: int, threads: int | None = None,
                       spinning: bool = False):
    """ONNX Runtime on an exported graph (`threads`: its intra-op threads; None: its default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    if not spinning:  # its idle threads would otherwise spin on the cores the next call needs
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    encode = hf_tokenizer(hf_dir, seq_length)

    def run(texts: list[str]) -> np.ndarray:
        features = {k: v.astype(np.int64) for k, v in encode(texts).items() if k in wanted}
        if "token_type_ids" in wanted and "token_type_ids" not in features:  # one segment
            features["token_type_ids"] = np.zeros_like(features["input_ids"])
        return softmax(session.run(["logits"], features)[0])
    return run


def versions() -> str:
    import onnxruntime
    import torch
    import transformers

    return (f"torch {torch.__version__}, transformers {transformers.__version__}, "
            f"onnxruntime {onnxruntime.__version__}")
