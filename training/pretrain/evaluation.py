"""Held-out pretraining evaluation: MLM and sentence-pair accuracy of a pretrainer.

`evaluate_pretraining` runs an `AlbertPretrainer` (or any checkpoint
`albert_tf.load_checkpoint` reads) over TFRecords from `albert-tf create-data`
and returns the masked-LM accuracy (weighted by `masked_lm_weights`, so padded
prediction slots do not count), the sentence-pair accuracy and both losses. The
sentence-pair label is the records' `next_sentence_labels`, so the same function
measures sentence-order (SOP) data and next-sentence (NSP) data alike: the
figure is the accuracy of the model's two-way sentence head on whatever task the
records hold.

Fill-mask accuracy: `mlm_accuracy` is top-1 on the records' masked positions (as
create-data masked them: whole-word n-grams, 80/10/10), `mlm_top5_accuracy` counts
the original piece among the head's 5 best. Against them stands a unigram baseline
that always answers the k pieces most often masked in other records (the training
data's masked labels, `masked_label_counts`): `unigram_top1_accuracy`,
`unigram_top5_accuracy`.

Example:
    >>> from albert_tf.training.pretrain.evaluation import evaluate_pretraining
    >>> evaluate_pretraining("out/pretrain/model", "out/heldout/pretrain-*.tfrecord")
    {'mlm_accuracy': 0.41, 'mlm_top5_accuracy': 0.62, 'sop_accuracy': 0.86,
     'mlm_loss': 3.2, 'sop_loss': 0.35, 'examples': 1984, 'masked_tokens': 37210}
    >>> counts = masked_label_counts("out/train/pretrain-*.tfrecord", vocab_size=30000)
    >>> evaluate_pretraining(model, heldout, unigram_counts=counts)["unigram_top5_accuracy"]
    0.21
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf.checkpoint import open_checkpoint
from albert_tf.models import AlbertPretrainer

from ..data import records as tfrecords
from .pipeline import list_files, pretraining_dataset, record_error
from .run import data_shapes

TOP_K = 5  # fill-mask: a hit when the masked piece is among the head's TOP_K best


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _batch_sums(outputs: dict, labels: dict) -> np.ndarray:
    """[correct masked tokens, masked tokens, weighted MLM CE, SOP correct, SOP CE, examples,
    masked tokens whose piece is in the top TOP_K]."""
    mlm_logits = np.asarray(outputs["mlm_logits"], np.float32)       # [B, P, V]
    ids = np.asarray(labels["masked_lm_ids"])                          # [B, P]
    weights = np.asarray(labels["masked_lm_weights"], np.float32)      # [B, P]
    sop_logits = np.asarray(outputs["sop_logits"], np.float32)         # [B, 2]
    sop = np.asarray(labels["sentence_order_label"])                   # [B]
    mlm_log_probs = _log_softmax(mlm_logits)
    mlm_ce = -np.take_along_axis(mlm_log_probs, ids[..., None], axis=-1)[..., 0]  # [B, P]
    sop_ce = -np.take_along_axis(_log_softmax(sop_logits), sop[:, None], axis=-1)[:, 0]
    # In the top k: fewer than k pieces score strictly higher than the right one.
    right = np.take_along_axis(mlm_logits, ids[..., None], axis=-1)       # [B, P, 1]
    in_top_k = (mlm_logits > right).sum(-1) < TOP_K                       # [B, P]
    return np.array([((mlm_logits.argmax(-1) == ids) * weights).sum(), weights.sum(),
                     (mlm_ce * weights).sum(), (sop_logits.argmax(-1) == sop).sum(),
                     sop_ce.sum(), len(sop), (in_top_k * weights).sum()], np.float64)


def masked_label_counts(data: str, vocab_size: int) -> np.ndarray:
    """How often each piece is a masked label (weight > 0) in TFRecords: int64 [vocab_size].

    Counts every record of `data` (glob(s) from `albert-tf create-data`); the unigram
    baseline of `evaluate_pretraining` ranks pieces by these counts.
    """
    seq_length, max_predictions = data_shapes(data)
    spec = {name: feature for name, feature in
            tfrecords.feature_spec(seq_length, max_predictions).items()
            if name in ("masked_lm_ids", tfrecords.WEIGHTS_FEATURE)}
    dataset = tf.data.TFRecordDataset(list_files(data)).batch(1024).map(
        lambda records: tf.io.parse_example(records, spec))
    counts = np.zeros(vocab_size, np.int64)
    for batch in dataset.as_numpy_iterator():
        labels = batch["masked_lm_ids"][batch[tfrecords.WEIGHTS_FEATURE] > 0]
        if labels.size and labels.max() >= vocab_size:
            raise ValueError(f"{data}: masked label id {labels.max()} is outside a "
                             f"vocabulary of {vocab_size} pieces")
        counts += np.bincount(labels, minlength=vocab_size)
    return counts


def evaluate_pretraining(model, data: str, batch_size: int = 64,
                         max_batches: int | None = None,
                         unigram_counts: np.ndarray | None = None) -> dict[str, float]:
    """Held-out MLM and sentence-pair metrics of a pretrainer on TFRecords.

    Args:
      model: an `AlbertPretrainer`, or a checkpoint path `open_checkpoint` opens
        (ours, TF1 or Hugging Face) holding both pretraining heads.
      data: TFRecord glob(s) from `albert-tf create-data` (SOP or NSP records); seq
        length and predictions per sequence are read from the first record.
      batch_size: examples per forward pass; the last partial batch is dropped.
      max_batches: stop after this many batches (None: one full pass).
      unigram_counts: [vocab_size] counts of masked labels elsewhere (the training
        data's, `masked_label_counts`): adds the unigram baseline, always answering
        the 1 (or TOP_K) most counted pieces, on the same masked tokens (ties: lower id).

    Returns:
      {"mlm_accuracy", "mlm_top5_accuracy", "sop_accuracy", "mlm_loss", "sop_loss":
       floats; "examples", "masked_tokens": counts; with unigram_counts,
       "unigram_top1_accuracy", "unigram_top5_accuracy"}. MLM figures are over the real
      masked tokens (weight 1), the losses are mean cross-entropies in nats.

    Raises:
      ValueError: no files, records that do not match, or data too small for one batch.
      CheckpointError: a checkpoint of another task than pretraining.
    """

    if isinstance(model, str):
        # The one door refuses another task before any weight is read.
        model = open_checkpoint(model, task=AlbertPretrainer.task).load()
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1")
    seq_length, max_predictions = data_shapes(data)
    dataset = pretraining_dataset(data, batch_size, seq_length, max_predictions,
                                  is_training=False, vocab_size=model.config.vocab_size,
                                  type_vocab_size=model.config.type_vocab_size)
    if max_batches is not None:
        dataset = dataset.take(max_batches)
    forward = tf.function(lambda inputs: model(inputs, training=False), reduce_retracing=True)
    totals = np.zeros(7, np.float64)
    vocab_size = model.config.vocab_size
    label_counts = np.zeros(vocab_size, np.int64)  # the masked pieces evaluated
    for inputs, labels in _refusing(dataset):
        outputs = forward(inputs)
        labels = {k: v.numpy() for k, v in labels.items()}
        totals += _batch_sums({k: v.numpy() for k, v in outputs.items()}, labels)
        masked_ids = labels["masked_lm_ids"][labels["masked_lm_weights"] > 0]
        label_counts += np.bincount(masked_ids, minlength=vocab_size)[:vocab_size]
    correct, masked, mlm_ce, sop_correct, sop_ce, examples, top_k = totals
    if examples == 0:
        raise ValueError(f"{data}: fewer records than one batch of {batch_size}")
    result = {"mlm_accuracy": float(correct / max(masked, 1.0)),
              f"mlm_top{TOP_K}_accuracy": float(top_k / max(masked, 1.0)),
              "sop_accuracy": float(sop_correct / examples),
              "mlm_loss": float(mlm_ce / max(masked, 1.0)),
              "sop_loss": float(sop_ce / examples),
              "examples": int(examples), "masked_tokens": int(masked)}
    if unigram_counts is not None:
        if len(unigram_counts) != vocab_size:
            raise ValueError(f"unigram_counts has {len(unigram_counts)} pieces, the model "
                             f"{vocab_size}")
        ranked = np.argsort(-np.asarray(unigram_counts), kind="stable")
        for k in (1, TOP_K):
            result[f"unigram_top{k}_accuracy"] = float(
                label_counts[ranked[:k]].sum() / max(masked, 1.0))
    return result


def _refusing(dataset):
    """Iterates `dataset`; a record the model cannot use is one line (`record_error`)."""
    iterator = iter(dataset)
    while True:
        try:
            yield next(iterator)
        except StopIteration:
            return
        except tf.errors.InvalidArgumentError as e:
            refused = record_error(e)
            if refused is None:
                raise
            raise refused from None
