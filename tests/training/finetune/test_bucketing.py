"""Length bucketing: static shapes per bucket, the same examples, and the same model outputs
as padding everything to the maximum length."""

import numpy as np
import pytest

from albert_tf import (
    AlbertConfig,
    AlbertMultipleChoice,
    AlbertSequenceClassifier,
    AlbertSpanExtractor,
)
from albert_tf.training.finetune.bucketing import INDEX_KEY, Encoded, default_buckets, make_dataset
from albert_tf.training.finetune.train import predict_rows

SEQ = 40
BUCKETS = [8, 16, SEQ]
CONFIG = AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12, num_hidden_layers=2,
                      num_attention_heads=3, intermediate_size=20, max_position_embeddings=SEQ)


def _examples(n=23, choices=None, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, SEQ + 1, size=n)
    lengths[0] = SEQ  # one example at the limit
    shape = (lambda l: (choices, l)) if choices else (lambda l: (l,))
    features = {
        "input_word_ids": [rng.integers(5, 37, size=shape(l)).astype(np.int32) for l in lengths],
        "input_mask": [np.ones(shape(l), np.int32) for l in lengths],
        "input_type_ids": [(np.arange(l) >= l // 2).astype(np.int32) * np.ones(shape(l), np.int32)
                           for l in lengths],
    }
    return Encoded(features, {"logits": np.arange(n) % 3})


def test_default_buckets():
    assert default_buckets(128) == [16, 32, 64, 128]
    assert default_buckets(384) == [16, 32, 64, 128, 256, 384]
    assert default_buckets(10) == [10]


@pytest.mark.parametrize("choices", [None, 4])
def test_bucketed_batches_hold_the_same_examples_with_static_lengths(choices):
    data = _examples(choices=choices)
    seen = {}
    for buckets in (None, BUCKETS):
        rows = {}
        for features, labels in make_dataset(data, 4, SEQ, buckets, with_index=True):
            t = features["input_word_ids"].shape[-1]
            assert t in (BUCKETS if buckets else [SEQ])
            if choices:
                assert features["input_word_ids"].shape[1] == choices
            for b, index in enumerate(features[INDEX_KEY].numpy()):
                length = data.lengths()[index]
                assert t >= length and (buckets is None or t == min(x for x in BUCKETS if x >= length))
                ids = features["input_word_ids"].numpy()[b]
                np.testing.assert_array_equal(ids[..., :length], data.features["input_word_ids"][index])
                assert not ids[..., length:].any()  # padding is zero
                assert not features["input_mask"].numpy()[b][..., length:].any()
                assert labels["logits"].numpy()[b] == data.labels["logits"][index]
                rows[int(index)] = True
        seen[buckets is None] = sorted(rows)
    assert seen[True] == seen[False] == list(range(len(data)))


def test_training_pipeline_has_static_batch_and_repeats():
    data = _examples(n=10)
    ds = make_dataset(data, 4, SEQ, BUCKETS, training=True, seed=1)
    features, labels = ds.element_spec
    assert features["input_word_ids"].shape.as_list() == [4, None]
    assert labels["logits"].shape.as_list() == [4]
    batches = list(ds.take(12))  # more than one pass: it repeats
    assert all(f["input_word_ids"].shape[0] == 4 for f, _ in batches)


def test_bad_input_is_refused():
    data = _examples(n=5)
    with pytest.raises(ValueError, match="more than seq_length=20"):
        make_dataset(data, 2, 20)
    with pytest.raises(ValueError, match="ending at seq_length"):
        make_dataset(data, 2, SEQ, [16, 8, SEQ])
    with pytest.raises(ValueError, match="differ in length"):
        Encoded({"input_word_ids": [np.ones(3)]}, {"logits": np.arange(2)})


@pytest.mark.parametrize("model_fn, choices", [
    (lambda: AlbertSequenceClassifier(CONFIG, 3), None),
    (lambda: AlbertSpanExtractor(CONFIG, answerability=True), None),
    (lambda: AlbertMultipleChoice(CONFIG), 4),
])
def test_model_outputs_equal_fixed_padding(model_fn, choices):
    model = model_fn()
    data = _examples(n=13, choices=choices, seed=2)
    fixed = predict_rows(model, data, 4, SEQ, None)
    bucketed = predict_rows(model, data, 4, SEQ, BUCKETS)
    if model.task_spec.single_output:  # one array's rows, as the model returns it
        assert isinstance(fixed, list) and isinstance(bucketed, list)
        fixed, bucketed = {"output": fixed}, {"output": bucketed}
    assert fixed.keys() == bucketed.keys()
    for name in fixed:
        for i, length in enumerate(data.lengths()):
            a, b = fixed[name][i], bucketed[name][i]
            if name in ("start_logits", "end_logits"):  # per token: compare real positions
                assert a.shape == (SEQ,) and b.shape[0] in BUCKETS
                a, b = a[:length], b[:length]
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # Non-trivial outputs: examples differ from each other.
    first = np.stack([r.reshape(-1)[:2] for r in fixed[next(iter(fixed))]])
    assert np.ptp(first, axis=0).max() > 1e-4
