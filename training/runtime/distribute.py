"""Distribution strategies and precision policies.

`create_strategy("tpu:NAME" | "mirrored" | "multi_worker" | "cpu" | "default")` builds
the strategy, `set_precision` picks the Keras dtype policy for it,
`cpu_training_candidates` the CPU recipes worth timing, `resolve_jit_compile` the XLA
setting.
The Keras 3 `fit` workarounds that make every strategy train live in `fit_steps.py`.
"""

from __future__ import annotations

import json
import logging
import os

import keras
import tensorflow as tf

from albert_tf import precisions
from albert_tf.errors import UserError

logger = logging.getLogger(__name__)

STRATEGIES = ("default", "cpu", "mirrored", "multi_worker", "tpu")
# The Keras dtype policies `--precision` trains under, and its words (albert_tf.precisions,
# their one home); the task record stores the policy a model was trained in.
TRAINING_PRECISIONS = precisions.TRAINING_PRECISIONS
PRECISIONS = precisions.TRAINING_WORDS


class StrategyError(UserError):
    """A strategy that cannot be built from the given name or environment."""


def create_strategy(spec: str = "default") -> tf.distribute.Strategy:
    """Builds a `tf.distribute.Strategy` from a short spec.

    Args:
        spec: "default" (TF's default: one device, the GPU if any), "cpu" (one CPU),
            "mirrored" (all local GPUs, or all local logical CPUs when there is no
            GPU), "multi_worker" (MultiWorkerMirroredStrategy from `TF_CONFIG`),
            "tpu" (the local TPU VM) or "tpu:NAME_OR_ADDRESS" (a Cloud TPU name or
            "grpc://host:port").
    """
    name, _, target = spec.partition(":")
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "cpu":
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = None if gpus else [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker":
        _check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        return _tpu_strategy(target or "local")
    raise StrategyError(f"strategy={spec!r}: expected one of {', '.join(STRATEGIES)} "
                        "(tpu may be written tpu:NAME_OR_ADDRESS)")


def _check_tf_config() -> None:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise StrategyError("strategy=multi_worker needs the TF_CONFIG environment variable "
                            '({"cluster": {"worker": [...]}, "task": {...}})')
    try:
        config = json.loads(raw)
        workers = config["cluster"]["worker"]
        task = config["task"]
        task["type"], int(task["index"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise StrategyError(f"TF_CONFIG is not a valid cluster spec: {e}") from None
    if not workers:
        raise StrategyError("TF_CONFIG: cluster.worker is empty")


def _tpu_strategy(target: str) -> tf.distribute.TPUStrategy:
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=target)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError) as e:
        raise StrategyError(f"strategy=tpu:{target}: cannot reach the TPU: {e}") from None
    return tf.distribute.TPUStrategy(resolver)


def resolve_jit_compile(requested: bool | None) -> bool:
    """`jit_compile` for model.compile: as requested, or (None) XLA on GPUs only.

    TPUs compile with XLA whatever this says. On CPU, None skips XLA's compile time,
    which suits short runs; for long ones pass True: XLA measured 1.5x faster for the
    albert-base LAMB pretraining step on 2 cores (benchmarks/bench_pretrain.py).
    """
    if requested is not None:
        return bool(requested)
    return bool(tf.config.list_logical_devices("GPU"))


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes final artifacts (task 0 unless a chief is named)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return not has_chief and resolver.task_type == "worker" and resolver.task_id == 0


def cpu_bf16_features(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU flags that decide bfloat16 speed on this machine (empty off Linux).

    `avx512_bf16` converts and dot-products bf16 in AVX-512 registers; `amx_bf16` /
    `amx_tile` are the matrix tiles that make oneDNN's bf16 matmuls several times
    faster than float32. The one place that reads them.
    """
    wanted = {"avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"}
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(wanted.intersection(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return frozenset()


def _policy_name(precision: str) -> str:
    """A `--precision` value with its alias resolved ("auto" stays "auto")."""
    try:
        return precisions.training_precision(precision)
    except ValueError as e:
        raise UserError(str(e)) from None


# The instructions that make oneDNN's bf16 matmuls faster than float32 on a CPU.
_BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_training_candidates(precision: str = "auto", jit_compile: bool | None = None,
                            features: frozenset[str] | None = None
                            ) -> list[tuple[str, bool | None]]:
    """The (precision, jit_compile) recipes a run may train with here.

    On a CPU, "auto" offers float32 under XLA and, where the CPU has bf16 instructions
    (`avx512_bf16` or AMX), mixed_bfloat16 through TensorFlow's oneDNN kernels (XLA's CPU
    backend does not use them): which one is faster depends on the CPU and the model,
    so a run that trains long enough to care times each (`pretrain.precision`);
    `jit_compile` other than None overrides the XLA setting of both. An explicit
    precision, or a GPU, is the one candidate as given (`set_precision` and
    `resolve_jit_compile` resolve "auto" and None). `features`: `cpu_bf16_features()`.
    """
    policy = _policy_name(precision)
    if policy != precisions.AUTO or tf.config.list_logical_devices("GPU"):
        return [(policy, jit_compile)]
    features = cpu_bf16_features() if features is None else features
    candidates = [("float32", True if jit_compile is None else jit_compile)]
    if features & _BF16_CPU_FLAGS:
        candidates.append(("mixed_bfloat16", False if jit_compile is None else jit_compile))
    return candidates


def candidate_name(precision: str, jit_compile: bool | None) -> str:
    """How a recipe is named in reports: the precision, "+xla" when XLA compiles it."""
    return f"{precision}+xla" if jit_compile else precision


def set_precision(precision: str, strategy: tf.distribute.Strategy) -> str:
    """Sets the global Keras dtype policy and returns its name.

    "auto" is mixed_bfloat16 on TPU, mixed_float16 on GPU (the LossScaleOptimizer is
    added by `compile`) and float32 on CPU. Pretraining resolves a CPU's "auto" by timing
    its `cpu_training_candidates` before it calls this (`pretrain.precision`); a short
    job (fine-tuning) keeps float32.
    Older spellings are accepted (`precisions.TRAINING_ALIASES`: bfloat16 and bf16 are
    mixed_bfloat16 here).
    Call it before the model is built.
    """
    policy = _policy_name(precision)
    if policy == precisions.AUTO:
        if isinstance(strategy, tf.distribute.TPUStrategy):
            policy = "mixed_bfloat16"
        elif tf.config.list_logical_devices("GPU"):
            policy = "mixed_float16"
        else:
            policy = "float32"
    keras.config.set_dtype_policy(policy)
    return policy


def scale_batch(global_batch_size: int, strategy: tf.distribute.Strategy) -> int:
    """The per-replica batch size; the global batch must split evenly across replicas."""
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % replicas:
        raise UserError(f"global batch size {global_batch_size} is not divisible by the "
                         f"{replicas} replicas of {type(strategy).__name__}")
    return global_batch_size // replicas
