"""The demo's classifier, twice: fine-tuned from the pretrained encoder and from a random one.

Both runs are the same `albert-tf finetune --task classification` command (same data,
epochs, seed, precision); only the checkpoint differs. The random encoder is a
checkpoint of the pretraining model's config and vocabulary written by the package's
own writer (`save_checkpoint`) before any training. Both are scored by one function,
`heldout_accuracy`, on the held-out documents' sentences, with the fine-tuning
package's own encoding, prediction and metric code.
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np

from albert_tf import AlbertPretrainer, AlbertSequenceClassifier, save_checkpoint
from albert_tf.checkpoint import open_checkpoint
from albert_tf.tokenizer.spm import AlbertTokenizer

from ...data import split as corpus_tasks
from ...finetune import files, metrics
from ...finetune import run as finetune_cli
from ...finetune.examples import encode_texts
from ...finetune.train import RESULTS_FILE, predict_rows
from ...pretrain.config import PretrainConfig
from ...pretrain.run import run_model_config

DEV_FRACTION = 0.15  # of the training documents, to choose the epoch on
BATCH_SIZE = 32
EVAL_BATCH_SIZE = 64


def write_random_encoder(cfg: PretrainConfig, directory: str, seq_length: int) -> str:
    """A checkpoint of the model `cfg` pretrains, randomly initialized (seeded by cfg.seed)."""
    config, _ = run_model_config(cfg, AlbertTokenizer(cfg.spm_model).vocab_size)
    keras.utils.set_random_seed(cfg.seed)
    model = AlbertPretrainer(config, name="albert_pretrainer")
    return save_checkpoint(model, directory, spm_model=cfg.spm_model, seq_length=seq_length)


def write_fit_and_dev(split: dict, out: str) -> list[str]:
    """The training documents' sentences split by document into fit and dev files."""
    rows = corpus_tasks.read_rows(split["classify_train"])
    fit, dev = corpus_tasks.split_rows_by_document(rows, DEV_FRACTION)
    paths = [os.path.join(out, "fit.jsonl"), os.path.join(out, "dev.jsonl")]
    os.makedirs(out, exist_ok=True)
    for path, part in zip(paths, (fit, dev)):
        if not os.path.exists(path):
            corpus_tasks.write_rows(path, part)
    return paths


def fine_tune(checkpoint: str, model: str, data: list[str], epochs: int, learning_rate: float,
              seq_length: int, precision: str, jit: bool | None) -> None:
    """`albert-tf finetune --task classification` from `checkpoint` into `model` (its errors
    reach the demo's caller as they are)."""
    finetune_cli.run(finetune_cli.FinetuneOptions(
        task=AlbertSequenceClassifier.task, checkpoint=checkpoint, output=model, data=list(data),
        columns="text:label", epochs=epochs, batch_size=BATCH_SIZE,
        learning_rate=learning_rate, seq_length=seq_length, precision=precision,
        set=[f"jit_compile={'auto' if jit is None else str(jit).lower()}"]))


def heldout_accuracy(model_dir: str, heldout_file: str) -> dict:
    """Accuracy of a fine-tuned classifier on a classify-*.jsonl file: {"accuracy", "examples"}."""
    opened = open_checkpoint(model_dir)
    record = opened.task_record
    tokenizer_files = opened.tokenizer_files()
    tokenizer = AlbertTokenizer(tokenizer_files.spm_model,
                                do_lower_case=tokenizer_files.do_lower_case,
                                keep_accents=tokenizer_files.keep_accents)
    examples, _ = files.read_text_file(heldout_file, [corpus_tasks.TEXT_COLUMN],
                                       corpus_tasks.LABEL_COLUMN, False, record.label_names)
    data = encode_texts(tokenizer, examples, record.seq_length, "logits")
    # One padded length (no buckets): one trace instead of one per bucket; the same
    # predictions up to rounding.
    outputs = predict_rows(opened.load(), data, EVAL_BATCH_SIZE, record.seq_length, None)
    predicted = np.argmax(np.stack(outputs), axis=-1)  # logits [N,C] -> [N]
    return {"accuracy": metrics.accuracy(data.labels["logits"], predicted),
            "examples": len(data)}


def dev_history(model: str) -> list[dict]:
    """The per-epoch dev evaluations `albert-tf finetune` recorded in eval_results.json."""
    with open(os.path.join(model, RESULTS_FILE), encoding="utf-8") as f:
        return json.load(f)["history"]
