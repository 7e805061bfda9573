"""`albert-tf export --format litert`: every task the format serves, exported from a tiny
checkpoint and run in LiteRT's interpreter from raw text, against the eager Keras model
fed by the Python tokenizer; the refusals (tasks, options, ops, a file that disagrees)."""

from __future__ import annotations

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (
    AlbertConfig,
    AlbertMaskedLM,
    AlbertMultipleChoice,
    AlbertPretrainer,
    AlbertSequenceClassifier,
    AlbertSequenceRegressor,
    AlbertSpanExtractor,
    AlbertTokenClassifier,
    load_checkpoint,
    save_checkpoint,
)
from albert_tf.checkpoint import task_record_of
from albert_tf.serving import export
from albert_tf.serving.export import TASKS
from albert_tf.serving.litert import convert, runtime
from albert_tf.serving.litert.tasks import LITE_TASKS, REFUSED, TEXT_SPEC
from albert_tf.tokenizer.spm import AlbertTokenizer

pytestmark = pytest.mark.slow  # exports five .tflite files (conversion and parity gates)

SEQ = 48
LABELS = ["red", "green", "blue"]
TEXTS = ["", "Crème brûlée à Zürich, NAÏVE café", "It costs 1,000,000, then 2,500, ok?",
         "The quick brown fox jumps over the lazy dog.", "日本語 😀 text", "word " * 60]
MASKED = ["The [MASK] sat on the [MASK].", "[MASK]", "no mask here", "", "x[MASK]y 1,[MASK]"]
ATOL = 1e-5


def _config(vocab_size):
    return AlbertConfig(vocab_size=vocab_size, embedding_size=8, hidden_size=12,
                        num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                        max_position_embeddings=64, initializer_range=0.2)


def _ids(tok, texts_a, texts_b=None, width=None):
    rows = [tok.encode_pair(a, None if texts_b is None else texts_b[i], SEQ)
            for i, a in enumerate(texts_a)]
    width = width or max(sum(r["input_mask"]) for r in rows)
    return {name: np.array([r[name][:width] for r in rows], np.int32) for name in rows[0]}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, spm_model_path):
    """{task: (checkpoint, .tflite path)}, each exported through the command line."""
    keras.utils.set_random_seed(3)
    tok = AlbertTokenizer(spm_model_path)
    config = _config(tok.vocab_size)
    models = {"pretraining": AlbertPretrainer(config), "masked_lm": AlbertMaskedLM(config),
              "classification": AlbertSequenceClassifier(config, len(LABELS)),
              "regression": AlbertSequenceRegressor(config)}
    # Spread the classifier over its labels on the test texts (random weights sit near
    # uniform), so that a wrong probability or label shows.
    logits = models["classification"](_ids(tok, TEXTS)).numpy()
    bias = models["classification"].head.dense.bias
    bias.assign(bias.numpy() - logits.mean(axis=0))
    root = tmp_path_factory.mktemp("litert")
    paths = {}
    for task, model in models.items():
        checkpoint = str(root / task)
        save_checkpoint(model, checkpoint, spm_model=spm_model_path, seq_length=SEQ,
                        label_names=LABELS if task == "classification" else None)
        output = str(root / f"{task}.tflite")
        assert export.main(["--checkpoint", checkpoint, "--output", output,
                            "--format", "litert"]) == 0
        paths[task] = (checkpoint, output)
    output = str(root / "encoder.tflite")
    assert export.main(["--checkpoint", paths["classification"][0], "--output", output,
                        "--format", "litert", "--task", "encoder"]) == 0
    paths["encoder"] = (paths["classification"][0], output)
    return paths


def _run(path, signature, **inputs):
    interpreter = runtime.open_interpreter(path)
    return runtime.call(interpreter, signature, **{
        k: runtime.strings(v) if isinstance(v, list) else v for k, v in inputs.items()})


def test_every_served_task_has_one_table_entry_and_the_others_a_reason():
    assert set(LITE_TASKS) | set(REFUSED) == set(TASKS)
    assert not set(LITE_TASKS) & set(REFUSED)


def test_classifier_from_raw_text_equals_the_model(exported, spm_model_path):
    checkpoint, path = exported["classification"]
    tok, model = AlbertTokenizer(spm_model_path), load_checkpoint(checkpoint)
    for signature, inputs, ids in (
            ("serving_default", {"text": TEXTS}, _ids(tok, TEXTS)),
            ("text_pair", {"text_a": TEXTS, "text_b": TEXTS[::-1]}, _ids(tok, TEXTS, TEXTS[::-1])),
            ("token_ids", _ids(tok, TEXTS, width=SEQ), _ids(tok, TEXTS))):
        got = _run(path, signature, **inputs)
        want = tf.nn.softmax(model(ids)).numpy()
        np.testing.assert_allclose(got["probabilities"], want, atol=ATOL, rtol=0)
        assert got["label_id"].tolist() == want.argmax(-1).tolist()
        assert [s.decode() for s in got["label"]] == [LABELS[i] for i in want.argmax(-1)]
    assert len(set(got["label_id"].tolist())) > 1  # the labels are spread
    ops = runtime.signature_ops(open(path, "rb").read())
    assert ops["token_ids"]["custom"] == []
    assert {ops[s]["custom"] == ["TFText>FastSentencepieceTokenize"]
            for s in ("serving_default", "text_pair")} == {True}
    assert not any(op.startswith("Flex") for used in ops.values() for op in used["builtin"])


def test_regressor_and_encoder_features_equal_the_model(exported, spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    checkpoint, path = exported["regression"]
    model = load_checkpoint(checkpoint)
    got = _run(path, "text_pair", text_a=TEXTS, text_b=TEXTS[::-1])
    np.testing.assert_allclose(got["score"], model(_ids(tok, TEXTS, TEXTS[::-1])),
                               atol=ATOL, rtol=0)
    checkpoint, path = exported["encoder"]
    encoder = load_checkpoint(checkpoint).encoder
    ids = _ids(tok, TEXTS)
    got = _run(path, "serving_default", text=TEXTS)
    want = encoder(ids)
    assert got["input_mask"].tolist() == ids["input_mask"].tolist()
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(got[name], want[name], atol=ATOL, rtol=0)


@pytest.mark.parametrize("task", ["pretraining", "masked_lm"])
def test_fill_mask_equals_the_model_on_the_split_text(exported, spm_model_path, task):
    tok = AlbertTokenizer(spm_model_path)
    checkpoint, path = exported[task]
    model = load_checkpoint(checkpoint)
    got = _run(path, "fill_mask", text=MASKED)
    for row, text in enumerate(MASKED):
        parts = [tok.encode(part) for part in text.split("[MASK]")]
        ids = [i for part in parts for i in part + [tok.mask_id]][:-1]
        packed = tok.pack(ids, None, SEQ)
        positions = [i for i, x in enumerate(packed["input_word_ids"]) if x == tok.mask_id]
        assert got["mask_positions"][row].tolist() == positions + [-1] * (
            got["mask_positions"].shape[1] - len(positions))
        if not positions:
            assert got["top_k_ids"][row].tolist() == [[-1] * 5] * got["top_k_ids"].shape[1]
            continue
        features = {k: np.array([v], np.int32) for k, v in packed.items()}
        logits = model({**features, "masked_lm_positions": np.array([positions], np.int32)})
        scores, ids = tf.math.top_k(tf.nn.softmax(logits["mlm_logits"][0]), k=5)
        assert got["top_k_ids"][row, :len(positions)].tolist() == ids.numpy().tolist()
        np.testing.assert_allclose(got["top_k_scores"][row, :len(positions)], scores, atol=ATOL)
        assert [[t.decode() for t in r] for r in got["top_k_tokens"][row, :len(positions)]] == [
            [tok.id_to_piece(i) for i in r] for r in ids.numpy()]


def test_empty_batches(exported):
    _, path = exported["classification"]
    assert _run(path, "serving_default", text=[])["probabilities"].shape == (0, len(LABELS))
    _, path = exported["pretraining"]
    assert _run(path, "fill_mask", text=[])["top_k_ids"].shape == (0, 1, 5)


def test_quantized_files_report_their_agreement(exported, tmp_path, caplog):
    checkpoint, path = exported["classification"]
    sizes = {}
    for quantize in ("float16", "int8"):
        output = str(tmp_path / f"{quantize}.tflite")
        with caplog.at_level(logging.INFO):
            export.export(checkpoint, output, format="litert", quantize=quantize)
        assert "serving_default.label_id top-1 agreement" in caplog.text
        assert "serving_default.probabilities max |Δ|" in caplog.text
        sizes[quantize] = os.path.getsize(output)
        got = _run(output, "serving_default", text=TEXTS)
        assert got["probabilities"].shape == (len(TEXTS), len(LABELS))
    assert sizes["int8"] < sizes["float16"] < os.path.getsize(path)


@pytest.mark.parametrize("model_class, task", [
    (lambda c: AlbertSpanExtractor(c), "span"),
    (lambda c: AlbertTokenClassifier(c, 2), "token_classification")])
def test_tasks_the_format_does_not_serve_are_one_line(tmp_path, spm_model_path, capsys,
                                                      model_class, task):
    config = _config(AlbertTokenizer(spm_model_path).vocab_size)
    save_checkpoint(model_class(config), str(tmp_path / "ckpt"), spm_model=spm_model_path)
    output = str(tmp_path / "out.tflite")
    assert export.main(["--checkpoint", str(tmp_path / "ckpt"), "--output", output,
                        "--format", "litert"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot write {task} as LiteRT: {task}: " in err[0], err
    assert os.listdir(tmp_path) == ["ckpt"]


def test_bad_options_are_one_line_before_any_work(exported, tmp_path, capsys):
    checkpoint, path = exported["regression"]
    cases = [(["--output", str(tmp_path / "m"), "--quantize", "int8"],
              "--quantize is for --format litert"),
             (["--output", path, "--format", "litert"], "exists; a .tflite export never"),
             (["--output", str(tmp_path / "no" / "m.tflite"), "--format", "litert"],
              "no such directory"),
             (["--output", str(tmp_path / "m.tflite"), "--format", "litert", "--version", "3"],
              "--version is for SavedModels"),
             (["--output", str(tmp_path / "m.tflite"), "--format", "litert",
               "--precision", "bfloat16"], "--precision bfloat16 is for SavedModels")]
    for extra, message in cases:
        assert export.main(["--checkpoint", checkpoint, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
    assert os.listdir(tmp_path) == []


def test_the_gate_refuses_a_float_file_that_disagrees(exported, tmp_path, spm_model_path,
                                                      monkeypatch):
    checkpoint, _ = exported["regression"]
    model = load_checkpoint(checkpoint)
    tok = AlbertTokenizer(spm_model_path)
    real = convert.convert

    def converted_then_changed(module, quantize):  # a conversion that lost a weight
        flatbuffer = real(module, quantize)
        bias = module.model.head.dense.bias
        bias.assign(bias.numpy() + 1e-3)
        return flatbuffer

    monkeypatch.setattr(convert, "convert", converted_then_changed)
    output = str(tmp_path / "m.tflite")
    with pytest.raises(convert.LiteRTError,
                       match=r"disagrees with the Keras model: serving_default.score differs "
                             r"by 0.001 > 0.0001; nothing was written"):
        convert.write_litert(model, tok, task_record_of(model), output, "regression", SEQ)
    assert os.listdir(tmp_path) == []


def test_an_op_without_a_litert_kernel_is_refused(spm_model_path):
    class Lower:
        @tf.function(input_signature=[TEXT_SPEC])
        def lower(self, text):
            return {"lower": tf.strings.lower(text)}

        def signatures(self):
            return {"serving_default": self.lower}

    flatbuffer = convert.convert(Lower(), "none")
    with pytest.raises(convert.LiteRTError, match="signature serving_default needs StringLower, "
                                                  "which no LiteRT kernel implements"):
        convert.check_ops(flatbuffer)


def test_multi_label_classifier_gives_sigmoids_and_active_classes(exported, tmp_path,
                                                                  spm_model_path):
    checkpoint, _ = exported["classification"]
    model, tok = load_checkpoint(checkpoint), AlbertTokenizer(spm_model_path)
    record = task_record_of(model, label_names=LABELS).replace(problem_type="multi_label")
    output = str(tmp_path / "multi.tflite")
    convert.write_litert(model, tok, record, output, "classification", SEQ)
    got = _run(output, "serving_default", text=TEXTS)
    want = tf.sigmoid(model(_ids(tok, TEXTS))).numpy()
    np.testing.assert_allclose(got["probabilities"], want, atol=ATOL, rtol=0)
    assert got["active"].tolist() == (want > 0.5).tolist()
    assert got["active"].any() and not got["active"].all()


def test_multiple_choice_equals_the_race_packing(tmp_path, spm_model_path):
    keras.utils.set_random_seed(5)
    tok = AlbertTokenizer(spm_model_path)
    model = AlbertMultipleChoice(_config(tok.vocab_size))
    record = task_record_of(model).replace(max_qa_length=6)
    output = str(tmp_path / "choice.tflite")
    convert.write_litert(model, tok, record, output, "multiple_choice", 24)
    contexts = [TEXTS[1], "", TEXTS[5]]
    options = [[TEXTS[2], "", "a dog"], ["Über 😀", TEXTS[5], "yes"], ["no", "maybe so", TEXTS[3]]]
    got = _run(output, "serving_default", context=contexts, options=options)
    rows = []
    for context, choices in zip(contexts, options):
        for option in choices:  # RACE: the option's last 6 tokens, the context cut to fit
            qa = tok.encode(option)[-6:] if tok.encode(option) else []
            rows.append(tok.pack(tok.encode(context)[:24 - 3 - len(qa)], qa, 24))
    features = {k: np.array([r[k] for r in rows], np.int32).reshape(3, 3, 24) for k in rows[0]}
    want = tf.nn.softmax(model(features)).numpy()
    np.testing.assert_allclose(got["probabilities"], want, atol=ATOL, rtol=0)
    assert got["choice"].tolist() == want.argmax(-1).tolist()
    ids = _run(output, "token_ids", **features)
    np.testing.assert_allclose(ids["probabilities"], want, atol=ATOL, rtol=0)
