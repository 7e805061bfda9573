"""The issue's end-to-end case: a cased classifier fine-tuned by `albert-tf finetune`,
exported as a SavedModel and as float32 and int8 .tflite files; a fresh process with
only TensorFlow and tensorflow-text runs the .tflite files from raw text in LiteRT's
interpreter (TF-Text's kernels, no Flex op), and the float file's probabilities equal
the SavedModel's on raw text (accents, digits with commas, empty strings). The int8
file's top-1 agreement with the float file is measured on the dev set."""

from __future__ import annotations

import csv
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, save_checkpoint
from albert_tf.serving import export
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.finetune.run import main as finetune_main
from tests.helpers.fresh_process import run_fresh

pytestmark = pytest.mark.slow

LABELS = ["short", "medium", "long"]
RAW = ["", " ", "Crème Brûlée in ZÜRICH, naïve Café", "It costs 1,000,000, then 2,500, OK?",
       "São Paulo: 3,500,000 PEOPLE", "The Quick Brown Fox", "日本語 😀 Ünïcödé",
       "tab\tand\nnewline", "A longer text with many words. " * 12]

_LITERT = r"""
import pickle, sys
import numpy as np
import tensorflow_text
from tensorflow.lite.python.interpreter import InterpreterWithCustomOps
calls = pickle.load(open(sys.argv[1], "rb"))
results = {}
for path, texts in calls.items():
    registrars = list(tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
    interpreter = InterpreterWithCustomOps(model_path=path, custom_op_registerers=registrars)
    runner = interpreter.get_signature_runner("serving_default")
    results[path] = runner(text=np.array(texts, dtype=object))
results["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
pickle.dump(results, open(sys.argv[2], "wb"))
"""


def _sentences(corpus_documents, count):
    return [s for d in corpus_documents for s in d if 3 <= len(s.split()) <= 24][:count]


def test_cased_classifier_float_and_int8_files(tmp_path, cased_spm_model_path, corpus_documents):
    tok = AlbertTokenizer(cased_spm_model_path, do_lower_case=False)
    config = AlbertConfig(vocab_size=tok.vocab_size, embedding_size=16, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=64)
    pretrained = str(tmp_path / "pretrained")
    save_checkpoint(AlbertPretrainer(config), pretrained, spm_model=cased_spm_model_path,
                    do_lower_case=False)
    texts = _sentences(corpus_documents, 160)
    def label(s):
        return LABELS[min(2, len(s.split()) // 8)]

    paths = []
    for name, rows in (("train", texts[:120]), ("dev", texts[120:])):
        paths.append(str(tmp_path / f"{name}.csv"))
        with open(paths[-1], "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("text", "size")] + [(s, label(s)) for s in rows])
    run = str(tmp_path / "run")
    assert finetune_main(["--task", "classify", "--checkpoint", pretrained, "--output", run,
                          "--data", *paths, "--columns", "text:size", "--epochs", "3",
                          "--batch-size", "16", "--seq-length", "48", "--learning-rate", "1e-3",
                          "--set",
                          "do_lower_case=false", "jit_compile=false", "buckets=none"]) == 0
    saved = str(tmp_path / "saved")
    assert export.main(["--checkpoint", run, "--output", saved]) == 0
    files = {q: str(tmp_path / f"model_{q}.tflite") for q in ("none", "int8")}
    for quantize, path in files.items():
        assert export.main(["--checkpoint", run, "--output", path, "--format", "litert",
                            "--quantize", quantize]) == 0
    dev = texts[120:]
    inputs = [t.encode() for t in RAW + dev]
    served = tf.saved_model.load(os.path.join(saved, "1")).signatures["serving_default"](
        text=tf.constant(inputs))
    got = run_fresh(_LITERT, {path: inputs for path in files.values()}, tmp_path)
    float_file, int8_file = got[files["none"]], got[files["int8"]]
    np.testing.assert_allclose(float_file["probabilities"], served["probabilities"].numpy(),
                               atol=1e-4, rtol=0)
    assert float_file["label"].tolist() == served["label"].numpy().tolist()
    assert set(float_file["label"].tolist()) <= {n.encode() for n in LABELS}
    n = len(RAW)
    agreement = np.mean(int8_file["label_id"][n:] == float_file["label_id"][n:])
    delta = np.max(np.abs(int8_file["probabilities"] - float_file["probabilities"]))
    top2 = np.sort(float_file["probabilities"][n:], axis=-1)[:, -2:]
    print(f"int8 against float32 on {len(dev)} dev sentences: top-1 agreement {agreement:.3f}, "
          f"max |Δp| {delta:.2g}, smallest top-1 margin {np.min(top2[:, 1] - top2[:, 0]):.2g}")
    assert agreement >= 0.9 and delta < 0.1
    assert os.path.getsize(files["int8"]) < os.path.getsize(files["none"])
