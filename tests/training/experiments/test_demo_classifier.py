"""The demo's two classifiers: the random encoder it writes, and the held-out score both share."""

import json

import numpy as np
import pytest


def test_random_encoder_has_the_pretraining_model_shape(tmp_path, spm_model_path):
    from albert_tf.checkpoint import open_checkpoint
    from albert_tf.tokenizer.spm import AlbertTokenizer
    from albert_tf.training.experiments.demo.classifier import write_random_encoder
    from albert_tf.training.experiments.demo.run import DEMO_MODEL
    from albert_tf.training.pretrain.config import PretrainConfig
    from albert_tf.training.pretrain.run import run_model_config

    cfg = PretrainConfig(train_data="x", output_dir="y", spm_model=spm_model_path,
                         albert=dict(DEMO_MODEL))
    path = write_random_encoder(cfg, str(tmp_path / "random"), seq_length=64)
    opened = open_checkpoint(path)
    expected, _ = run_model_config(cfg, AlbertTokenizer(spm_model_path).vocab_size)
    assert opened.config == expected and opened.task_record.task == "pretraining"
    assert opened.tokenizer_files().spm_model  # the vocabulary travels with it
    first = [np.asarray(w) for w in opened.load().get_weights()]
    again = write_random_encoder(cfg, str(tmp_path / "again"), seq_length=64)
    second = [np.asarray(w) for w in open_checkpoint(again).load().get_weights()]
    assert all((a == b).all() for a, b in zip(first, second))  # seeded
    assert np.std(first[0]) > 0.005  # initialized, not zeros


def test_heldout_accuracy_matches_the_model_called_directly(tmp_path, spm_model_path,
                                                           corpus_documents):
    import keras

    from albert_tf import AlbertConfig, AlbertSequenceClassifier, save_checkpoint
    from albert_tf.tokenizer.spm import AlbertTokenizer
    from albert_tf.training.experiments.demo.classifier import heldout_accuracy

    labels = ["alpha", "beta", "gamma"]
    tokenizer = AlbertTokenizer(spm_model_path)
    keras.utils.set_random_seed(11)
    model = AlbertSequenceClassifier(AlbertConfig(
        vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=12, num_hidden_layers=1,
        num_attention_heads=3, intermediate_size=16, max_position_embeddings=32), len(labels))
    path = save_checkpoint(model, str(tmp_path / "classifier"), spm_model=spm_model_path,
                           label_names=labels, seq_length=32)
    sentences = [s for doc in corpus_documents[:5] for s in doc][:70]
    rows = [{"text": s, "label": labels[i % 3], "document": "d"} for i, s in enumerate(sentences)]
    heldout = tmp_path / "heldout.jsonl"
    heldout.write_text("".join(json.dumps(r) + "\n" for r in rows))

    result = heldout_accuracy(path, str(heldout))
    # Independently: each sentence packed to 32 tokens and the model called on it.
    packed = [tokenizer.encode_pair(r["text"], seq_length=32) for r in rows]
    inputs = {k: np.array([p[k] for p in packed], np.int32) for k in packed[0]}
    predicted = np.argmax(np.asarray(model(inputs, training=False)), axis=-1)
    gold = np.array([labels.index(r["label"]) for r in rows])
    assert result["examples"] == len(rows)
    assert result["accuracy"] == pytest.approx(float(np.mean(predicted == gold)))
    assert 0.0 < result["accuracy"] < 1.0
