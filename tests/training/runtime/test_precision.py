"""Precision choices: the CPU flags behind precision="auto", and bfloat16 serving exports.

A bfloat16 export must keep every signature's input and output dtypes, hold its
weights in bfloat16, and agree with the float32 export of the same checkpoint:
probabilities within 0.02 and the same top-1 label on nearly every text.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertSequenceClassifier, precisions, save_checkpoint
from albert_tf.serving import export, export_plan
from albert_tf.training.runtime import distribute

BF16_PROB_TOLERANCE = 0.02  # max |probability difference| bf16 vs fp32 export (README)


def test_cpu_bf16_features_reads_only_the_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: amx_bf16 in a name is not a flag\n"
                    "flags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512_vnni amx_tile\n"
                    "bugs\t\t: spectre_v1\n")
    assert distribute.cpu_bf16_features(str(info)) == {"avx512f", "avx512_bf16", "avx512_vnni",
                                                       "amx_tile"}
    assert distribute.cpu_bf16_features(str(tmp_path / "missing")) == frozenset()


@pytest.mark.parametrize("flags, policy", [
    # bf16 on CPU has not yet met the 2.5x-over-float32 bar at which "auto" would pick it.
    ({"avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}, "float32"),
    ({"avx512f", "avx512_bf16"}, "float32"),
    ({"avx512f", "avx512_vnni"}, "float32"),
    (set(), "float32"),
])
def test_auto_precision_on_cpu_follows_the_measured_decision(monkeypatch, flags, policy):
    import keras

    monkeypatch.setattr(distribute, "cpu_bf16_features", lambda: frozenset(flags))
    try:
        assert distribute.set_precision("auto", tf.distribute.get_strategy()) == policy
        assert keras.config.dtype_policy().name == policy
    finally:
        keras.config.set_dtype_policy("float32")


def test_the_task_record_accepts_every_training_precision():
    # --precision's policies are training's (distribute); the record stores the one used.
    from albert_tf.checkpoint.task_record import TaskRecord

    for policy in distribute.TRAINING_PRECISIONS:
        assert TaskRecord.create("regression", precision=policy).precision == policy


def test_export_precision_as_trained_reads_the_task_record():
    for word in ("as-trained", "auto"):  # auto: its older name
        assert precisions.served_dtype(word, "mixed_bfloat16") == "bfloat16"
        assert precisions.served_dtype(word, "bfloat16") == "bfloat16"
        assert precisions.served_dtype(word, "mixed_float16") == "float32"
        assert precisions.served_dtype(word, "float32") == "float32"
        assert precisions.served_dtype(word, None) == "float32"
    assert precisions.served_dtype("bfloat16", "float32") == "bfloat16"
    assert precisions.served_dtype("float32", "mixed_bfloat16") == "float32"
    with pytest.raises(export.ExportError,
                       match="^--precision 'fp8': expected one of as-trained, float32 or bfloat16$"):
        export_plan.export_word("fp8")


def test_one_word_per_precision_meaning():
    """Each vocabulary names each meaning once; an older spelling resolves to a word of its
    own vocabulary and is no word itself. bfloat16 is a whole cast in export and the
    record (Keras' policy name), mixed_bfloat16 in training; auto is training's only."""
    from albert_tf import precisions
    from albert_tf.errors import UsageError
    from albert_tf.serving import export_command
    from albert_tf.training.finetune import command as finetune_command
    from albert_tf.training.pretrain import command as pretrain_command

    for words, aliases in ((precisions.TRAINING_WORDS, precisions.TRAINING_ALIASES),
                           (precisions.EXPORT_WORDS, precisions.EXPORT_ALIASES)):
        assert len(set(words)) == len(words) and not set(words) & set(aliases)
        assert set(aliases.values()) <= set(words)
    assert set(precisions.TRAINING_PRECISIONS) <= set(precisions.POLICIES)
    assert precisions.AUTO not in precisions.EXPORT_WORDS
    assert precisions.training_precision("bf16") == precisions.training_precision(
        "bfloat16") == "mixed_bfloat16"
    assert precisions.export_precision("bfloat16") == "bfloat16"
    with pytest.raises(ValueError, match="'as-trained': expected one of auto, float32, "
                                         "mixed_float16 or mixed_bfloat16"):
        precisions.training_precision("as-trained")
    # The command lines: the words as help lists them, the older spellings still parsed.
    train_help = precisions.listed(precisions.TRAINING_WORDS)
    for parser in (finetune_command.parser(), pretrain_command.parser()):
        (option,) = [a for a in parser._actions if "--precision" in a.option_strings]
        assert option.help == train_help
    args = ["--checkpoint", "c", "--output", "o"]
    assert export_command.parse(args).precision == "as-trained"
    assert export_command.parse(args + ["--precision", "auto"]).precision == "as-trained"
    assert "{as-trained,float32,bfloat16}" in export_command.parser().format_help()
    with pytest.raises(UsageError, match="expected one of as-trained, float32 or bfloat16"):
        export_command.parse(args + ["--precision", "mixed_bfloat16"])


def test_an_alias_that_means_another_thing_elsewhere_warns_once(monkeypatch, caplog):
    """Training's bfloat16 / float16 are the mixed policies and export's auto is "as
    trained": each warns, once a process, naming the word to write; the others do not."""
    from albert_tf import precisions

    monkeypatch.setattr(precisions, "_WARNED", set())
    with caplog.at_level("WARNING", logger="albert_tf"):
        for _ in range(2):
            assert precisions.training_precision("bfloat16") == "mixed_bfloat16"
            assert precisions.export_precision("auto", "--precision ") == "as-trained"
            assert precisions.training_precision("bf16") == "mixed_bfloat16"  # not ambiguous
            assert precisions.export_precision("bfloat16") == "bfloat16"
    assert [r.getMessage() for r in caplog.records] == [
        "precision=bfloat16 means mixed_bfloat16 here (not Keras' pure bfloat16 policy, and "
        "export's whole bfloat16 cast); write mixed_bfloat16",
        "--precision auto means as-trained here (not training's precision chosen for the "
        "device); write as-trained"]


def test_the_task_record_says_which_precision_the_model_was_trained_in(tmp_path):
    import keras

    from albert_tf.checkpoint import open_checkpoint
    from albert_tf.checkpoint.task_record import TaskRecord, TaskRecordError

    config = AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12, num_hidden_layers=2,
                          num_attention_heads=3, intermediate_size=24, max_position_embeddings=16)
    saved = {}
    for policy in ("float32", "mixed_bfloat16"):
        keras.config.set_dtype_policy(policy)
        try:
            model = AlbertSequenceClassifier(config, 2)
        finally:
            keras.config.set_dtype_policy("float32")
        saved[policy] = save_checkpoint(model, str(tmp_path / policy), label_names=["x", "y"])
    assert open_checkpoint(saved["float32"]).task_record.precision == "float32"
    record = open_checkpoint(saved["mixed_bfloat16"]).task_record
    assert record.precision == "mixed_bfloat16"
    assert precisions.served_dtype("as-trained", record.precision) == "bfloat16"
    with pytest.raises(TaskRecordError, match="precision='fp8' in x.json is not one of"):
        TaskRecord.from_dict({"task": "regression", "precision": "fp8"}, source="x.json")


def _weight_dtypes(path: str) -> set:
    """Dtypes of the model weights saved in the SavedModel at `path`."""
    reader = tf.train.load_checkpoint(f"{path}/variables/variables")
    return {dtype for name, dtype in reader.get_variable_to_dtype_map().items()
            if "/.ATTRIBUTES/VARIABLE_VALUE" in name and dtype.is_floating}


def _signature_dtypes(fn) -> tuple[dict, dict]:
    inputs = {k: v.dtype for k, v in fn.structured_input_signature[1].items()}
    outputs = {k: v.dtype for k, v in fn.structured_outputs.items()}
    return inputs, outputs


@pytest.mark.slow
def test_bfloat16_export_keeps_signatures_and_matches_float32(tmp_path, spm_model_path,
                                                                corpus_documents):
    import keras

    from albert_tf.tokenizer.spm import AlbertTokenizer

    keras.utils.set_random_seed(11)
    vocab = AlbertTokenizer(spm_model_path).vocab_size
    config = AlbertConfig(vocab_size=vocab, embedding_size=16, hidden_size=48,
                          num_hidden_layers=3, num_attention_heads=4, intermediate_size=96,
                          max_position_embeddings=64, initializer_range=0.2)  # spread logits
    model = AlbertSequenceClassifier(config, 3)
    checkpoint = str(tmp_path / "ckpt")
    save_checkpoint(model, checkpoint, spm_model=spm_model_path,
                    label_names=["a", "b", "c"], seq_length=48)
    paths = {p: export.export(checkpoint, str(tmp_path / p), precision=p)
             for p in ("float32", "bfloat16")}
    served = {p: tf.saved_model.load(path) for p, path in paths.items()}
    assert _weight_dtypes(paths["bfloat16"]) == {tf.bfloat16}
    assert _weight_dtypes(paths["float32"]) == {tf.float32}
    for name, fn in served["float32"].signatures.items():
        assert _signature_dtypes(served["bfloat16"].signatures[name]) == _signature_dtypes(fn), name
    texts = tf.constant([s for doc in corpus_documents[:8] for s in doc[:8]])  # 64 sentences
    probs = {p: s.signatures["serving_default"](text=texts)["probabilities"].numpy()
             for p, s in served.items()}
    assert probs["bfloat16"].dtype == np.float32
    assert not np.array_equal(probs["bfloat16"], probs["float32"])  # really computed in bf16
    assert np.abs(probs["bfloat16"] - probs["float32"]).max() <= BF16_PROB_TOLERANCE
    agree = (probs["bfloat16"].argmax(-1) == probs["float32"].argmax(-1)).mean()
    assert agree >= 0.95, agree
