"""Writers to other libraries' formats: a Hugging Face directory, a KerasHub preset.

`albert-tf convert SRC DST --to hf|kerashub` ends here (`--to albert-tf`, the default,
is `ours.save_checkpoint`). Each writer places tensors by the same name table its
format's reader uses (`names.NAME_TABLE`'s HF column, `kerashub.KERAS_HUB_TABLE`), read
the other way, and writes the directory whole (`atomic.claimed_directory`).

What each target holds, refused (naming it) before any weight is read otherwise:

| task of the model | hf | kerashub |
|---|---|---|
| pretraining | AlbertForPreTraining | only with encoder_only (KerasHub has no sentence-order head) |
| masked_lm | AlbertForMaskedLM (head LayerNorm epsilon 1e-12 only) | AlbertMaskedLM (epsilon 1e-5 only) |
| classification | AlbertForSequenceClassification (id2label, problem_type) | AlbertTextClassifier (activation linear: single-label, sigmoid: multi-label) |
| regression | AlbertForSequenceClassification, problem_type regression | - |
| token_classification | AlbertForTokenClassification | - |
| span | AlbertForQuestionAnswering (not answerability's extra head) | - |
| multiple_choice | AlbertForMultipleChoice | - |
| span_beam | - | - |

`encoder_only` writes the encoder alone: HF's AlbertModel, KerasHub's backbone preset.
Both targets hold only weights shared per group across depth (sharing="all"); KerasHub
also only the tanh GELU, one dropout rate and num_layers divisible by num_groups. When
E == H both are written an identity E -> H projection (they always have one), which
reads back as none.

Long because it holds both targets' writers and the checks that refuse a model before
any weight is read; split, each format's refusals would sit apart from what it writes.
"""

from __future__ import annotations

import datetime
import io
import json
import logging
import os
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np

import albert_tf.checkpoint.kerashub as kh
from albert_tf.checkpoint.names import (
    POOLER,
    check_covered,
    encoder_rows,
    format_rows,
    stored_tensors,
    table_rows,
)
from albert_tf.checkpoint.readers import HF_CONFIG_FILE, HF_SAFETENSORS, CheckpointError
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.checkpoint.tokenizer_files import (
    HF_SPECIAL_TOKENS,
    HF_TOKENIZER_CONFIG,
    SPM_FILE,
    TokenizerFiles,
)
from albert_tf.config import AlbertConfig
from albert_tf.infra import atomic
from albert_tf.numerics import LAYER_NORM_EPSILON
from albert_tf.tasks import TASKS
from albert_tf.tokenizer.json_of_spm import tokenizer_json_of_spm
from albert_tf.tokenizer.kinds import (
    SENTENCEPIECE,
    TOKENIZER_JSON,
    VOCAB_FILE,
    WORDPIECE,
    is_tokenizer_json,
    vocabulary_file_name,
)

__all__ = ["TARGETS", "WRITERS", "check_target", "check_destination", "write_hf",
           "write_keras_hub"]

logger = logging.getLogger(__name__)

TARGETS = ("albert-tf", "hf", "kerashub")

# Our hidden_act -> Hugging Face's (config.HF_ACTIVATIONS read the other way).
HF_ACTIVATION_NAMES = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_exact": "gelu",
                       "relu": "relu", "silu": "silu", "swish": "silu", "tanh": "tanh",
                       "linear": "linear"}
# Each task's Hugging Face class and KerasHub task, as its entry in albert_tf.tasks says.
HF_ARCHITECTURE = {name: spec.hf_architecture for name, spec in TASKS.items()
                   if spec.hf_architecture}
HF_FILES = (HF_CONFIG_FILE, HF_SAFETENSORS, SPM_FILE, VOCAB_FILE, TOKENIZER_JSON, HF_TOKENIZER_CONFIG)

# The Adam each KerasHub task compiles with by default: save_to_preset stores its
# (untrained) state in task.weights.h5, and from_preset warns when it is not there.
KERAS_HUB_TASK_LEARNING_RATE = {kh.CLASSIFIER: 1e-5, kh.MASKED_LM: 5e-5}
KERAS_HUB_FILES = (kh.CONFIG_FILE, kh.METADATA_FILE, kh.MODEL_WEIGHTS, kh.TOKENIZER_FILE,
                   "assets", kh.TASK_FILE, kh.TASK_WEIGHTS, kh.PREPROCESSOR_FILE)
# The keras-hub version this layout was checked against (tools/make_kerashub_fixtures.py):
# metadata.json's keras_hub_version, which keras-hub writes and does not read.
KERAS_HUB_VERSION = "0.32.0"
_KERAS_HUB_MODULE = "keras_hub.src.models.albert."


# ----------------------------------------------------------------------- before any work
def check_target(target: str, config: AlbertConfig, record: TaskRecord,
                 encoder_only: bool, where: str) -> None:
    """Refuses, naming it, what `target` cannot hold of a model with this config and
    task record (`where`: the source, for the message). Needs no weights."""
    refuse = lambda why: CheckpointError(f"{where}: --to {target}: {why}")  # noqa: E731
    if target == "albert-tf":
        if encoder_only:
            raise refuse("--encoder-only applies to --to hf and --to kerashub; albert-tf's "
                         "format keeps the whole model")
        return
    if config.sharing != "all":
        raise refuse(f"sharing={config.sharing!r}: the format holds weights per group "
                     "shared across depth only (sharing='all')")
    if config.embedding_projection_position != "after_sum":
        raise refuse(f"embedding_projection_position={config.embedding_projection_position!r} "
                     "(brightmart/albert_zh's layout: the word vectors projected to H before "
                     "the position and token-type sums): the format projects after the sum "
                     "only, so no conversion is equivalent")
    if target == "hf":
        _check_hf(config, record, encoder_only, refuse)
    else:
        _check_keras_hub(config, record, encoder_only, refuse)


def _check_hf(config, record, encoder_only, refuse) -> None:
    if config.hidden_act not in HF_ACTIVATION_NAMES:
        raise refuse(f"hidden_act={config.hidden_act!r} has no Hugging Face name")
    if encoder_only:
        return
    if record.task not in HF_ARCHITECTURE:
        raise refuse(f"Hugging Face has no ALBERT head for task {record.task} (its "
                     "beam_span_head); pass --encoder-only to write the encoder alone")
    if record.answerability:  # SQuAD 2.0's extra head (span records only)
        raise refuse("Hugging Face's AlbertForQuestionAnswering has no answerability head "
                     "(answerable_classifier); pass --encoder-only to write the encoder alone")
    if record.mlm_layer_norm_epsilon not in (None, LAYER_NORM_EPSILON):
        raise refuse(f"the masked-LM head's LayerNorm epsilon is "
                     f"{record.mlm_layer_norm_epsilon:g} (mlm_layer_norm_epsilon), but a "
                     f"Hugging Face config has one layer_norm_eps for every LayerNorm and the "
                     f"encoder's is {LAYER_NORM_EPSILON:g}; pass --encoder-only to write the "
                     "encoder alone")


def _check_keras_hub(config, record, encoder_only, refuse) -> None:
    if config.hidden_act not in ("gelu", "gelu_new"):
        raise refuse(f"hidden_act={config.hidden_act!r}: KerasHub's AlbertBackbone uses the "
                     "tanh GELU ('gelu') only")
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        raise refuse(f"hidden_dropout_prob={config.hidden_dropout_prob} and "
                     f"attention_probs_dropout_prob={config.attention_probs_dropout_prob} "
                     "differ; AlbertBackbone has one dropout rate")
    if config.num_hidden_layers % config.num_hidden_groups:
        raise refuse(f"num_hidden_layers={config.num_hidden_layers} is not divisible by "
                     f"num_hidden_groups={config.num_hidden_groups}, as AlbertBackbone needs")
    if encoder_only:
        return
    spec = record.spec
    if spec.keras_hub is None:
        heads = " and ".join(spec.optional_heads)  # the pretrainer's, e.g. its sop_head
        raise refuse(f"KerasHub has no ALBERT task for {record.task} (AlbertTextClassifier "
                     "and AlbertMaskedLM only" + (f"; no place for its {heads}" if heads else "")
                     + "); pass --encoder-only to write the backbone preset alone")
    if record.mlm_layer_norm_epsilon not in (None, kh.MLM_LAYER_NORM_EPSILON):
        raise refuse(f"the masked-LM head's LayerNorm epsilon is "
                     f"{record.mlm_layer_norm_epsilon:g} (mlm_layer_norm_epsilon); KerasHub's "
                     f"AlbertMaskedLM fixes it at {kh.MLM_LAYER_NORM_EPSILON:g}; pass "
                     "--encoder-only to write the backbone alone")


def target_files(target: str) -> tuple[str, ...]:
    return HF_FILES if target == "hf" else KERAS_HUB_FILES  # what its writer writes


def check_destination(target: str, dst: str, force: bool) -> None:
    """`atomic.check_replaceable` for `target`'s files, `force` the --overwrite flag."""
    atomic.check_replaceable(dst, target_files(target), replace=force, flag="--overwrite",
                             product=f"a {target} checkpoint",
                             writer=f"a {target} checkpoint", error=CheckpointError)


# ----------------------------------------------------------------------- Hugging Face
def write_hf(model, dst: str, tokenizer: TokenizerFiles, record: TaskRecord,
             force: bool = False, encoder_only: bool = False) -> str:
    """Writes `model` as a Hugging Face ALBERT directory that `transformers`' classes
    load with `from_pretrained`: config.json, model.safetensors (HF's key names and
    [out, in] Linear weights), and its vocabulary + tokenizer_config.json: spiece.model
    with the tokenizer.json transformers 5 makes of it (`json_of_spm`; transformers 4
    reads it too), vocab.txt, or the tokenizer.json the model came with."""
    # Deferred: only this target needs safetensors.
    from safetensors.numpy import save

    check_target("hf", model.config, record, encoder_only, dst)
    rows = list(table_rows(model, format_rows("hf")))
    dropped: tuple[str, ...] = ()
    if encoder_only:
        rows, dropped = encoder_rows(model, rows)
    elif not model.uses_pooled_output:  # HF builds those heads' models without a pooler
        rows = [r for r in rows if not r[0].startswith(POOLER + ".")]
        dropped = ("encoder/pooler/",)
    check_covered(model, rows, dst, "hf", dropped)
    tensors = stored_tensors(model, rows)
    if encoder_only:  # an AlbertModel saved on its own: no "albert." prefix
        tensors = {k[len("albert."):]: v for k, v in tensors.items()}
    config = hf_config(model, record, encoder_only)
    with atomic.claimed_directory(dst, replace=force, writes=target_files("hf"),
                                  error=CheckpointError) as staging:
        with open(os.path.join(staging, HF_CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, sort_keys=True)
            f.write("\n")
        # Made in memory and written by open(): the file gets the umask's mode like the
        # others (safetensors' own writer makes it 0600, unreadable to a server's user).
        _write_bytes(os.path.join(staging, HF_SAFETENSORS),
                     save(tensors, metadata={"format": "pt"}))
        if tokenizer.spm_model is not None:
            shutil.copyfile(tokenizer.spm_model, os.path.join(
                staging, vocabulary_file_name(tokenizer.spm_model, tokenizer.kind)))
            if tokenizer.kind == SENTENCEPIECE and not is_tokenizer_json(tokenizer.spm_model):
                # transformers 4 reads this file when it is there (else it converts
                # spiece.model its own way) and so tokenizes as transformers 5 does
                _write_json(os.path.join(staging, TOKENIZER_JSON), _spm_tokenizer_json(tokenizer))
            with open(os.path.join(staging, HF_TOKENIZER_CONFIG), "w", encoding="utf-8") as f:
                json.dump(hf_tokenizer_config(model.config, tokenizer), f, indent=2,
                          sort_keys=True)
                f.write("\n")
    logger.info("wrote %s for transformers' %s (%d tensors)", dst, config["architectures"][0],
                len(tensors))
    return dst


def _spm_tokenizer_json(tokenizer: TokenizerFiles) -> dict[str, Any]:
    with open(tokenizer.spm_model, "rb") as f:
        return tokenizer_json_of_spm(f.read(), tokenizer.do_lower_case, tokenizer.keep_accents,
                                     where=tokenizer.spm_model)


def _write_bytes(path: str, data: bytes) -> None:  # by open(): the umask's mode
    with open(path, "wb") as f:
        f.write(data)


def hf_config(model, record: TaskRecord, encoder_only: bool = False) -> dict[str, Any]:
    """The config.json `transformers.AlbertConfig.save_pretrained` writes for this model."""
    config = model.config
    head = getattr(model, "head", None)
    values = {
        "architectures": ["AlbertModel" if encoder_only else HF_ARCHITECTURE[record.task]],
        "model_type": "albert", "dtype": "float32",
        "vocab_size": config.vocab_size, "embedding_size": config.embedding_size,
        "hidden_size": config.hidden_size, "num_hidden_layers": config.num_hidden_layers,
        "num_hidden_groups": config.num_hidden_groups,
        "inner_group_num": config.inner_group_num,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": HF_ACTIVATION_NAMES[config.hidden_act],
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": LAYER_NORM_EPSILON,
        "classifier_dropout_prob": head.dropout_rate if head is not None else 0.1,
        "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3,
        "tie_word_embeddings": True, "id2label": None, "label2id": None,
    }
    if not encoder_only:
        values.update(_hf_head_fields(record))
    if values["id2label"] is None:
        del values["id2label"], values["label2id"]
    return values


def _hf_head_fields(record: TaskRecord) -> dict[str, Any]:
    """config.json's fields for the head: classes (id2label) and HF's problem_type."""
    if record.spec.classes:
        names = record.label_names or [f"LABEL_{i}" for i in range(record.num_classes)]
        fields = {"id2label": {str(i): name for i, name in enumerate(names)}, "label2id": None}
        # Single-label with several classes is what HF assumes when problem_type is unset
        # (and leaves unset); one class would be taken for regression.
        if record.problem_type is not None and (record.problem_type != "single_label"
                                                or record.num_classes == 1):
            fields["problem_type"] = record.spec.hf_problem_types[record.problem_type]
        return fields
    if record.spec.hf_problem_type is not None:  # regression: one output, a classifier's class
        return {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0},
                "problem_type": record.spec.hf_problem_type}
    return {}


def hf_tokenizer_config(config: AlbertConfig, tokenizer: TokenizerFiles) -> dict[str, Any]:
    """tokenizer_config.json for transformers' AlbertTokenizer on spiece.model, or its
    BertTokenizer on vocab.txt (the Chinese models' way)."""
    if tokenizer.kind == WORDPIECE:
        if tokenizer.split_characters:
            logger.warning("the model reads text character by character (split_characters, "
                           "fine-tuned on one-character-a-line files); transformers' "
                           "BertTokenizer has no such option: give it text with a space "
                           "between characters, or pass is_split_into_words=True with one "
                           "character a word")
        return {"tokenizer_class": "BertTokenizer", "do_lower_case": tokenizer.do_lower_case,
                "strip_accents": not tokenizer.keep_accents,
                "tokenize_chinese_chars": tokenizer.tokenize_chinese_chars,
                "model_max_length": config.max_position_embeddings,
                **HF_SPECIAL_TOKENS[WORDPIECE]}
    return {"tokenizer_class": "AlbertTokenizer", "do_lower_case": tokenizer.do_lower_case,
            "keep_accents": tokenizer.keep_accents,
            "model_max_length": config.max_position_embeddings,
            **HF_SPECIAL_TOKENS[SENTENCEPIECE]}


# ----------------------------------------------------------------------- KerasHub
def write_keras_hub(model, dst: str, tokenizer: TokenizerFiles, record: TaskRecord,
                    force: bool = False, encoder_only: bool = False) -> str:
    """Writes `model` as a KerasHub preset that `keras_hub.models.AlbertBackbone` (and
    for a classifier or masked LM, `AlbertTextClassifier` / `AlbertMaskedLM`) load
    with `from_preset`; with its tokenizer (`AlbertTokenizer.from_preset`) when the
    model has a SentencePiece model."""
    # Deferred: only this target writes HDF5 files.
    import h5py

    config = model.config
    check_target("kerashub", config, record, encoder_only, dst)
    if tokenizer.kind == WORDPIECE and tokenizer.spm_model is not None:
        raise CheckpointError(f"{dst}: KerasHub's ALBERT presets hold a SentencePiece "
                              f"tokenizer, and this model's is WordPiece "
                              f"({tokenizer.spm_model}); convert --to hf (BertTokenizer) or "
                              "to albert-tf instead")
    if tokenizer.spm_model is not None and is_tokenizer_json(tokenizer.spm_model):
        raise CheckpointError(f"{dst}: KerasHub's ALBERT presets hold a SentencePiece model, "
                              f"and this model's tokenizer is a tokenizer.json "
                              f"({tokenizer.spm_model}); convert --to hf or to albert-tf instead, "
                              "or pass --spm-model with the original spiece.model")
    if tokenizer.spm_model is not None and (tokenizer.do_lower_case
                                            or not tokenizer.keep_accents):
        logger.warning("KerasHub feeds text to SentencePiece unchanged: the preset's users "
                       "must lower-case%s text themselves, as this model's tokenizer does",
                       "" if tokenizer.keep_accents else " and strip accents from")
    rows = list(table_rows(model, kh.KERAS_HUB_TABLE, kh.block_fields(config)))
    task = None if encoder_only else record.spec.keras_hub
    dropped: tuple[str, ...] = ()
    if encoder_only:
        rows, dropped = encoder_rows(model, rows)
    check_covered(model, rows, dst, "kerashub", dropped)
    tensors = stored_tensors(model, rows)
    backbone = keras_hub_backbone_config(config)
    with atomic.claimed_directory(dst, replace=force,
                                  writes=target_files("kerashub"),
                                  error=CheckpointError) as staging:
        _write_json(os.path.join(staging, kh.CONFIG_FILE), backbone)
        _write_json(os.path.join(staging, kh.METADATA_FILE), _metadata(tensors))
        for prefix, file in (("backbone/", kh.MODEL_WEIGHTS), ("task/", kh.TASK_WEIGHTS)):
            chosen = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
            if chosen:
                buffer = io.BytesIO()  # closed before the disk is touched (a full disk)
                with h5py.File(buffer, "w") as f:
                    for name, value in sorted(chosen.items()):
                        f.create_dataset(name, data=value)
                    if prefix == "task/":  # the optimizer's iterations and learning rate
                        f.create_dataset("optimizer/vars/0", data=np.int64(0))
                        f.create_dataset("optimizer/vars/1", data=np.float32(
                            KERAS_HUB_TASK_LEARNING_RATE[task]))
                _write_bytes(os.path.join(staging, file), buffer.getvalue())
        tokenizer_config = None
        if tokenizer.spm_model is not None:
            tokenizer_config = _tokenizer_config()
            _write_json(os.path.join(staging, kh.TOKENIZER_FILE), tokenizer_config)
            os.makedirs(os.path.dirname(os.path.join(staging, kh.VOCABULARY)))
            shutil.copyfile(tokenizer.spm_model, os.path.join(staging, kh.VOCABULARY))
        if task is not None:
            preprocessor = None
            if tokenizer_config is not None:
                preprocessor = _preprocessor_config(task, tokenizer_config, record, config)
                _write_json(os.path.join(staging, kh.PREPROCESSOR_FILE), preprocessor)
            _write_json(os.path.join(staging, kh.TASK_FILE),
                        _task_config(task, model, record, backbone, preprocessor))
    logger.info("wrote KerasHub preset %s (%s, %d tensors)", dst, task or kh.BACKBONE,
                len(tensors))
    return dst


def _write_json(path: str, value) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=4)


def _serialized(module: str, class_name: str, registered: str, config: dict) -> dict:
    return {"module": _KERAS_HUB_MODULE + module, "class_name": class_name, "config": config,
            "registered_name": registered}


def _policy(name: str) -> dict:
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name},
            "registered_name": None}


def keras_hub_backbone_config(config: AlbertConfig) -> dict[str, Any]:
    """config.json as AlbertBackbone.save_to_preset writes it (float32 policy)."""
    arguments = {theirs: getattr(config, ours) for theirs, ours in kh.CONFIG_KEYS.items()}
    arguments["dropout"] = config.hidden_dropout_prob
    return _serialized("albert_backbone", "AlbertBackbone", kh.BACKBONE,
                       {"name": "albert_backbone", "trainable": True,
                        "dtype": _policy("float32"), **arguments})


def _tokenizer_config() -> dict[str, Any]:
    return _serialized("albert_tokenizer", "AlbertTokenizer", kh.TOKENIZER,
                       {"name": "albert_tokenizer", "trainable": True, "dtype": _policy("int32"),
                        "config_file": kh.TOKENIZER_FILE, "proto": None,
                        "sequence_length": None, "add_bos": False, "add_eos": False})


def _preprocessor_config(registered: str, tokenizer_config: dict, record: TaskRecord,
                         config: AlbertConfig) -> dict[str, Any]:
    """preprocessor.json: the KerasHub task's (`registered`) preprocessor, at the record's
    sequence length (else KerasHub's default, DEFAULT_SEQ_LENGTH, at most the position
    table)."""
    length = record.seq_length or config.default_seq_length()
    settings = {"name": None, "trainable": True, "dtype": _policy("float32"),
                "tokenizer": tokenizer_config, "config_file": kh.PREPROCESSOR_FILE,
                "sequence_length": length, "truncate": "round_robin"}
    if registered == kh.MASKED_LM:
        # AlbertMaskedLMPreprocessor's defaults: what masking it applies when training.
        settings.update(mask_selection_rate=0.15, mask_selection_length=96,
                        mask_token_rate=0.8, random_token_rate=0.1,
                        name="albert_masked_lm_preprocessor")
        return _serialized("albert_masked_lm_preprocessor", "AlbertMaskedLMPreprocessor",
                           kh.PREPROCESSORS[registered], settings)
    settings["name"] = "albert_text_classifier_preprocessor"
    return _serialized("albert_text_classifier_preprocessor", "AlbertTextClassifierPreprocessor",
                       kh.PREPROCESSORS[registered], settings)


def _task_config(registered: str, model, record: TaskRecord, backbone: dict,
                 preprocessor: dict | None) -> dict[str, Any]:
    if registered == kh.MASKED_LM:
        return _serialized("albert_masked_lm", "AlbertMaskedLM", registered,
                           {"backbone": backbone, "preprocessor": preprocessor,
                            "name": "albert_masked_lm"})
    # Logits (activation "linear", keras-hub's default) for single-label classification:
    # what albert-tf's classifier returns; sigmoid marks multi-label.
    activation = "sigmoid" if record.problem_type == "multi_label" else "linear"
    return _serialized("albert_text_classifier", "AlbertTextClassifier", registered,
                       {"backbone": backbone, "preprocessor": preprocessor,
                        "name": "albert_text_classifier", "num_classes": model.num_classes,
                        "activation": activation, "dropout": model.head.dropout_rate})


def _metadata(tensors: dict[str, np.ndarray]) -> dict[str, Any]:
    import keras  # deferred: the version the weights file layout is Keras 3's

    count = sum(int(v.size) for k, v in tensors.items() if k.startswith("backbone/"))
    return {"keras_version": keras.version(), "keras_hub_version": KERAS_HUB_VERSION,
            "parameter_count": count,
            "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
            "tasks": ["MaskedLM", "TextClassifier"]}


WRITERS: dict[str, Callable[..., str]] = {"hf": write_hf, "kerashub": write_keras_hub}
