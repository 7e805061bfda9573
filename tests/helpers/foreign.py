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


def write_armed_saved_model(directory, weights: dict, marker, hidden_size: int,
                            depth: int = 2) -> None:
    """A SavedModel built to catch a reader that runs its graph: its variables are an
    ALBERT encoder's, named as a TF-Hub export names them (`weights`: name -> array),
    its `__call__` returns what the encoder's does (sequence_output, pooled_output,
    `depth` encoder_outputs; Pow and Tanh, as the tanh GELU has), and calling it
    copies /etc/hostname to `marker`. Reading it as data leaves `marker` absent.
    """
    import tensorflow as tf  # deferred: only the tests that write SavedModels need it

    marker = str(marker)
    module = tf.Module()
    module.weights_ = [tf.Variable(value, name=name) for name, value in sorted(weights.items())]
    spec = {name: tf.TensorSpec([None, None], tf.int32) for name in INPUT_NAMES}

    @tf.function(input_signature=[spec], autograph=False)
    def call(inputs):
        copied = tf.io.write_file(marker, tf.io.read_file("/etc/hostname"))
        with tf.control_dependencies([copied]):
            ids = tf.cast(inputs["input_word_ids"], tf.float32)[..., None]
        hidden = tf.tanh(tf.pow(ids * tf.ones([hidden_size]), 3.0))
        return {"sequence_output": hidden, "pooled_output": hidden[:, 0],
                "encoder_outputs": [hidden] * depth}

    module.__call__ = call
    tf.saved_model.save(module, str(directory))
