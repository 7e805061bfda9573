"""Held-out pretraining evaluation: MLM and sentence-pair accuracy of a pretrainer.

`evaluate_pretraining` runs an `AlbertPretrainer` (or any checkpoint
`albert_tf.load_checkpoint` reads) over TFRecords from `albert-tf create-data`
and returns the masked-LM accuracy (weighted by `masked_lm_weights`, so padded
prediction slots do not count), the sentence-pair accuracy and both losses. The
sentence-pair label is the records' `next_sentence_labels`, so the same function
measures sentence-order (SOP) data and next-sentence (NSP) data alike: the
figure is the accuracy of the model's two-way sentence head on whatever task the
records hold.

Example:
    >>> from albert_tf.training.pretrain.evaluation import evaluate_pretraining
    >>> evaluate_pretraining("out/pretrain/model", "out/heldout/pretrain-*.tfrecord")
    {'mlm_accuracy': 0.41, 'sop_accuracy': 0.86, 'mlm_loss': 3.2, 'sop_loss': 0.35,
     'examples': 1984, 'masked_tokens': 37210}
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf.checkpoint import open_checkpoint

from .pipeline import pretraining_dataset
from .run import data_shapes


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _batch_sums(outputs: dict, labels: dict) -> np.ndarray:
    """[correct masked tokens, masked tokens, weighted MLM CE, SOP correct, SOP CE, examples]."""
    mlm_logits = np.asarray(outputs["mlm_logits"], np.float32)       # [B, P, V]
    ids = np.asarray(labels["masked_lm_ids"])                          # [B, P]
    weights = np.asarray(labels["masked_lm_weights"], np.float32)      # [B, P]
    sop_logits = np.asarray(outputs["sop_logits"], np.float32)         # [B, 2]
    sop = np.asarray(labels["sentence_order_label"])                   # [B]
    mlm_log_probs = _log_softmax(mlm_logits)
    mlm_ce = -np.take_along_axis(mlm_log_probs, ids[..., None], axis=-1)[..., 0]  # [B, P]
    sop_ce = -np.take_along_axis(_log_softmax(sop_logits), sop[:, None], axis=-1)[:, 0]
    return np.array([((mlm_logits.argmax(-1) == ids) * weights).sum(), weights.sum(),
                     (mlm_ce * weights).sum(), (sop_logits.argmax(-1) == sop).sum(),
                     sop_ce.sum(), len(sop)], np.float64)


def evaluate_pretraining(model, data: str, batch_size: int = 64,
                         max_batches: int | None = None) -> dict[str, float]:
    """Held-out MLM and sentence-pair metrics of a pretrainer on TFRecords.

    Args:
      model: an `AlbertPretrainer`, or a checkpoint path `open_checkpoint` opens
        (ours, TF1 or Hugging Face) holding both pretraining heads.
      data: TFRecord glob(s) from `albert-tf create-data` (SOP or NSP records); seq
        length and predictions per sequence are read from the first record.
      batch_size: examples per forward pass; the last partial batch is dropped.
      max_batches: stop after this many batches (None: one full pass).

    Returns:
      {"mlm_accuracy", "sop_accuracy", "mlm_loss", "sop_loss": floats;
       "examples", "masked_tokens": counts}. MLM figures are over the real masked
      tokens (weight 1), the losses are mean cross-entropies in nats.

    Raises:
      ValueError: no files, records that do not match, a model without pretraining
        heads, or data too small for one batch.
    """

    if isinstance(model, str):
        opened = open_checkpoint(model)
        if opened.task_record.task != "pretraining":  # before any weight is read
            raise ValueError(f"{model}: holds a {opened.task_record.task} model, not a "
                             "pretrainer with MLM and sentence-order heads")
        model = opened.load()
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1")
    seq_length, max_predictions = data_shapes(data)
    dataset = pretraining_dataset(data, batch_size, seq_length, max_predictions,
                                  is_training=False)
    if max_batches is not None:
        dataset = dataset.take(max_batches)
    forward = tf.function(lambda inputs: model(inputs, training=False), reduce_retracing=True)
    totals = np.zeros(6, np.float64)
    for inputs, labels in dataset:
        outputs = forward(inputs)
        totals += _batch_sums({k: v.numpy() for k, v in outputs.items()},
                              {k: v.numpy() for k, v in labels.items()})
    correct, masked, mlm_ce, sop_correct, sop_ce, examples = totals
    if examples == 0:
        raise ValueError(f"{data}: fewer records than one batch of {batch_size}")
    return {"mlm_accuracy": float(correct / max(masked, 1.0)),
            "sop_accuracy": float(sop_correct / examples),
            "mlm_loss": float(mlm_ce / max(masked, 1.0)),
            "sop_loss": float(sop_ce / examples),
            "examples": int(examples), "masked_tokens": int(masked)}
