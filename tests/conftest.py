"""Shared pytest fixtures: real text and SentencePiece models trained inside the test session.

Nothing is downloaded: the text is the embedded corpus (Python's own
documentation and docstrings), and the vocabularies are trained from it with
`albert_tf.training.vocab.train_vocab`, the code path of `albert-tf vocab`.
"""

from __future__ import annotations

import random

import pytest

_NUM_DOCUMENTS = 300
_VOCAB_SIZE = 1000
_SAMPLED_LINES = 5000  # sentencepiece's input_sentence_size: keeps training to a few seconds


@pytest.fixture(scope="session")
def corpus_documents() -> list[list[str]]:
    """300 documents of real English prose from `embedded_documents()`, each a list of
    sentences (15,000 sentences, 1.2M characters). Session-scoped; do not mutate."""
    from albert_tf.training.corpus import embedded_documents

    return list(embedded_documents(max_documents=_NUM_DOCUMENTS))


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory, corpus_documents) -> str:
    """`corpus_documents` written in the original pretraining text layout: one
    sentence per line, a blank line after each document. Path to a .txt file."""
    from albert_tf.training.corpus import write_corpus_file

    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    write_corpus_file(str(path), iter(corpus_documents))
    return str(path)


def _train(tmp_path_factory, name: str, inputs: list[str], **kwargs) -> str:
    import sentencepiece as spm

    from albert_tf.training.vocab import train_vocab

    spm.set_random_generator_seed(1234)  # the line sampling is then reproducible
    prefix = tmp_path_factory.mktemp("spm") / name
    model_path, _ = train_vocab(inputs, str(prefix), _VOCAB_SIZE,
                                input_sentence_size=_SAMPLED_LINES, num_threads=2, **kwargs)
    return model_path


@pytest.fixture(scope="session")
def spm_model_path(tmp_path_factory, corpus_file) -> str:
    """Path to a lowercase ALBERT-convention SentencePiece unigram .model (vocab_size
    1000; <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4, user-defined symbols at 5-12,
    no BOS/EOS), trained with `train_vocab` on `corpus_file`. Use it with
    `AlbertTokenizer(spm_model_path)` / `AlbertPreprocessor(spm_model_path, ...)`
    (do_lower_case=True)."""
    return _train(tmp_path_factory, "lower", [corpus_file])


@pytest.fixture(scope="session")
def cased_spm_model_path(tmp_path_factory, corpus_file) -> str:
    """Like `spm_model_path` but trained with do_lower_case=False (`--no-lower-case`):
    pieces keep their case. Use with `AlbertTokenizer(path, do_lower_case=False)`."""
    return _train(tmp_path_factory, "cased", [corpus_file], do_lower_case=False)


def _numbers_file(path) -> str:
    """Lines dense in "digit," pieces ("1,000,", "x3,") so the vocabulary learns them."""
    rng = random.Random(7)
    words = ["item", "x", "v", "page", "step", "row", "in", "paid", "costs", "about"]
    lines = []
    for _ in range(3000):
        parts = []
        for _ in range(rng.randint(3, 8)):
            value = rng.choice([rng.randint(0, 20), rng.randint(1000, 99999), 1000000])
            number = f"{value:,}" if rng.random() < 0.6 else str(value)
            glue = rng.choice(["", " ", " "])  # "x3," continues a word; "x 3," does not
            parts.append(f"{rng.choice(words)}{glue}{number},")
        lines.append(" ".join(parts))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def digit_comma_spm_model_path(tmp_path_factory, corpus_file) -> str:
    """Like `spm_model_path`, but also trained on synthetic lines full of numbers with
    commas, so that it has pieces such as "▁1," and "3," (with and without "▁") that
    trigger the original digit-comma rule. For tests of that rule."""
    numbers = _numbers_file(tmp_path_factory.mktemp("numbers") / "numbers.txt")
    return _train(tmp_path_factory, "numbers", [corpus_file, numbers])
