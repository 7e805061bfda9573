"""The layout of a training run's output directory, declared once.

    OUTPUT/model/          the finished model, an albert-tf checkpoint (pretrain)
    OUTPUT/checkpoints/    the resumable training state (pretrain)
    OUTPUT/tensorboard/    TensorBoard logs (pretrain, finetune; finetune's evaluations
                           in tensorboard/eval/)

Fine-tuning writes its model into OUTPUT itself (albert_config.json, model.weights.h5,
albert_task.json beside eval_results.json and the predictions).
"""

from __future__ import annotations

import os

MODEL_DIR = "model"
CHECKPOINTS_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"
EVAL_LOGS_DIR = "eval"  # below TENSORBOARD_DIR


def model_dir(output: str) -> str:
    """OUTPUT/model: a run's finished model."""
    return os.path.join(output, MODEL_DIR)


def checkpoints_dir(output: str) -> str:
    """OUTPUT/checkpoints: a run's resumable state."""
    return os.path.join(output, CHECKPOINTS_DIR)


def tensorboard_dir(output: str, *parts: str) -> str:
    """OUTPUT/tensorboard[/parts...]: a run's TensorBoard logs."""
    return os.path.join(output, TENSORBOARD_DIR, *parts)
