"""Which tensorflow/serving releases load an export: the tensorflow-text ops each one links.

TF Serving does not use the tensorflow-text installed beside the exporter: it links
`//tensorflow_text:ops_lib` of the version its `tensorflow_serving/workspace.bzl` pins
(`org_tensorflow_text`), and that target registers a subset of tensorflow-text's ops
(its 2.12.1 leaves out `trimmer_ops_cc`, hence serving#2267: `TFText>RoundRobinTrim` not
registered). The pins are read from tensorflow/serving's `tensorflow_serving/workspace.bzl`
at each release tag; the op libraries from tensorflow/text's `tensorflow_text/BUILD`
(`cc_library(name = "ops_lib")`'s deps) at tags v2.7.3, v2.8.2, v2.12.1 and v2.20.0, and the
op names from the kernels those deps build (`core/ops/*.cc` REGISTER_OP, and the `kOpName`
of `core/kernels/fast_wordpiece_tokenizer_kernel_template.h`):

| tensorflow/serving | tensorflow-text pinned | ops_lib deps albert-tf graphs use |
|---|---|---|
| 2.10.0 - 2.10.1 | 2.7.3 | normalize_ops_cc, sentencepiece_tokenizer_cc, |
|  |  | fast_wordpiece_tokenizer_cc, regex_split_ops_cc |
| 2.11.0 - 2.11.1 | 2.8.2 | the same |
| 2.12.0 - 2.19.1 | 2.12.1 | + fast_sentencepiece_tokenizer_cc |
| 2.20.0 | 2.20.0 | + trimmer_ops_cc |

What each export kind's graph holds: SentencePiece vocabularies NormalizeUTF8 and the
Sentencepiece*Op family (offsets for span QA and entities: SentencepieceTokenizeWithOffsetsOp)
or TFText>FastSentencepieceTokenize; WordPiece vocabularies NormalizeUTF8 (NFD) and
FastWordpieceTokenizeWithOffsets (ids and offsets alike); tokenizer.json pre-tokenizers
RegexSplitWithOffsets. LiteRT-only kernels (serving/litert) never reach a SavedModel.

Custom ops are compared here; core ops are checked by loading the export in the
release's TensorFlow (`albert-tf serving-check`, serving/serving_check.py). A tensorflow/serving
release X.Y.Z is built from TensorFlow X.Y, so that is the TensorFlow the check installs.
"""

from __future__ import annotations

__all__ = ["SERVING_RELEASES", "OPS_LIB", "NEWEST_RELEASE", "NUMERICS_SINCE", "oldest_release",
           "unlinked_ops",
           "image", "python_packages"]

IMAGE = "tensorflow/serving"

# The first release of each tensorflow-text pin (later releases keep it until the next row).
SERVING_RELEASES = (("2.10.0", "2.7.3"), ("2.11.0", "2.8.2"), ("2.12.0", "2.12.1"),
                    ("2.20.0", "2.20.0"))
NEWEST_RELEASE = SERVING_RELEASES[-1][0]

_SENTENCEPIECE = frozenset({
    "SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceTokenizeWithOffsetsOp",
    "SentencepieceDetokenizeOp", "SentencepieceIdToStringOp", "SentencepieceStringToIdOp",
    "SentencepieceVocabSizeOp"})
_NORMALIZE = frozenset({"NormalizeUTF8", "CaseFoldUTF8"})
_FAST_WORDPIECE = frozenset({"FastWordpieceTokenizeWithOffsets"})  # fast_wordpiece_tokenizer_cc
_REGEX_SPLIT = frozenset({"RegexSplitWithOffsets"})  # regex_split_ops_cc
_FAST_SENTENCEPIECE = frozenset({"TFText>FastSentencepieceTokenize",
                                 "TFText>FastSentencepieceDetokenize"})
_TRIMMERS = frozenset({"TFText>RoundRobinTrim", "TFText>RoundRobinGenerateMasks"})

_SINCE_2_7 = _NORMALIZE | _SENTENCEPIECE | _FAST_WORDPIECE | _REGEX_SPLIT
# tensorflow-text version -> the ops (of those albert-tf graphs can use) its ops_lib registers.
OPS_LIB = {
    "2.7.3": _SINCE_2_7,
    "2.8.2": _SINCE_2_7,
    "2.12.1": _SINCE_2_7 | _FAST_SENTENCEPIECE,
    "2.20.0": _SINCE_2_7 | _FAST_SENTENCEPIECE | _TRIMMERS,
}


# The oldest release whose TensorFlow answers an export of this precision as the
# exporting one does (within 1e-5), where that is later than its ops allow: measured with
# `albert-tf serving-check` on a bfloat16 classifier exported with TensorFlow 2.21
# (2026-11-29, AMX CPU): 2.12.0 and 2.16.1 differ by 2.0e-3 (their oneDNN rounds bf16
# matmuls otherwise); 2.17.0, 2.19.0 and 2.20.0 answer alike.
NUMERICS_SINCE = {"bfloat16": "2.17.0"}


def _version(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def oldest_release(custom_ops, precision: str = "float32") -> str | None:
    """The oldest tensorflow/serving release whose tensorflow-text has every op of
    `custom_ops` and whose TensorFlow answers an export computing in `precision` alike
    (`NUMERICS_SINCE`); None: no release in the table has the ops (`unlinked_ops`)."""
    needed = set(custom_ops)
    for release, text_version in SERVING_RELEASES:
        if needed <= OPS_LIB[text_version]:
            floor = NUMERICS_SINCE.get(precision, release)
            return max(release, floor, key=_version)
    return None


def unlinked_ops(custom_ops) -> list[str]:
    """The ops of `custom_ops` that no release in the table links, sorted."""
    return sorted(set(custom_ops) - OPS_LIB[SERVING_RELEASES[-1][1]])


def python_packages(release: str) -> tuple[str, str]:
    """pip requirements for the TensorFlow `release` is built on, and the tensorflow-text
    wheel built against it: ("tensorflow==X.Y.*", "tensorflow-text==X.Y.*").

    Raises:
      ValueError: `release` is not X.Y.Z, or older than the table's first release.
    """
    parts = release.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{release!r} is not a tensorflow/serving release X.Y.Z "
                         f"(e.g. {NEWEST_RELEASE})")
    first = tuple(int(p) for p in SERVING_RELEASES[0][0].split("."))
    if tuple(int(p) for p in parts) < first:
        raise ValueError(f"{release}: the table starts at {SERVING_RELEASES[0][0]}")
    minor = f"{parts[0]}.{parts[1]}"
    return f"tensorflow=={minor}.*", f"tensorflow-text=={minor}.*"


def image(release: str) -> str:
    """The Docker image of `release` (a pinned tag, never :latest)."""
    return f"{IMAGE}:{release}"
