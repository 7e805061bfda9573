"""Checks shared by the tests of the foreign readers (KerasHub, Model Garden, TF-Hub)."""

from __future__ import annotations

from albert_tf.inputs import INPUT_NAMES


def assert_tokenizer_matches(tokenizer, ref) -> None:
    """Our tokenizer gives the peer's recorded ids for each text (`texts_a`/`ids_a`,
    `texts_b`/`ids_b`, -1 padded) and packs each pair into the recorded inputs."""
    for texts, ids in (("texts_a", "ids_a"), ("texts_b", "ids_b")):
        for text, want in zip(ref[texts], ref[ids]):
            assert tokenizer.encode(str(text)) == [int(i) for i in want if i >= 0], text
    length = ref["input_word_ids"].shape[1]
    for row, (a, b) in enumerate(zip(ref["texts_a"], ref["texts_b"])):
        packed = tokenizer.encode_pair(str(a), str(b), seq_length=length)
        for key in INPUT_NAMES:
            assert packed[key] == list(ref[key][row]), (key, a, b)


def assert_lists_problems(message: str, count: int, parts, absent: str) -> None:
    """One error listing every tensor that does not fit, and not `absent` (bookkeeping)."""
    assert f"{count} tensor(s) do not fit" in message, message
    for part in parts:
        assert part in message, message
    assert absent not in message, message
