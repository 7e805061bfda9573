"""Which tensorflow/serving releases load an export: the tensorflow-text ops each one links.

TF Serving does not use the tensorflow-text installed beside the exporter: it links
`//tensorflow_text:ops_lib` of the version its `tensorflow_serving/workspace.bzl` pins
(`org_tensorflow_text`), and that target registers a subset of tensorflow-text's ops
(its 2.12.1 leaves out `trimmer_ops_cc`, hence serving#2267: `TFText>RoundRobinTrim` not
registered). The tables below are read from those files at each release tag:

| tensorflow/serving | tensorflow-text pinned | custom ops albert-tf graphs use, linked |
|---|---|---|
| 2.10.0 - 2.10.1 | 2.7.3 | NormalizeUTF8, CaseFoldUTF8, Sentencepiece*Op |
| 2.11.0 - 2.11.1 | 2.8.2 | the same |
| 2.12.0 - 2.19.1 | 2.12.1 | + TFText>FastSentencepieceTokenize / Detokenize |
| 2.20.0 | 2.20.0 | + TFText>RoundRobinTrim / RoundRobinGenerateMasks |

Only custom ops are compared: the core ops of an export made with a newer TensorFlow
than a server's are not checked here (the newest release is the safe image).
"""

from __future__ import annotations

__all__ = ["SERVING_RELEASES", "OPS_LIB", "NEWEST_RELEASE", "oldest_release", "image"]

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
_FAST_SENTENCEPIECE = frozenset({"TFText>FastSentencepieceTokenize",
                                 "TFText>FastSentencepieceDetokenize"})
_TRIMMERS = frozenset({"TFText>RoundRobinTrim", "TFText>RoundRobinGenerateMasks"})

# tensorflow-text version -> the ops (of those albert-tf graphs can use) its ops_lib registers.
OPS_LIB = {
    "2.7.3": _NORMALIZE | _SENTENCEPIECE,
    "2.8.2": _NORMALIZE | _SENTENCEPIECE,
    "2.12.1": _NORMALIZE | _SENTENCEPIECE | _FAST_SENTENCEPIECE,
    "2.20.0": _NORMALIZE | _SENTENCEPIECE | _FAST_SENTENCEPIECE | _TRIMMERS,
}


def oldest_release(custom_ops) -> str | None:
    """The oldest tensorflow/serving release whose tensorflow-text has every op of
    `custom_ops` (None: no release in the table has them all)."""
    needed = set(custom_ops)
    for release, text_version in SERVING_RELEASES:
        if needed <= OPS_LIB[text_version]:
            return release
    return None


def image(release: str) -> str:
    """The Docker image of `release` (a pinned tag, never :latest)."""
    return f"{IMAGE}:{release}"
