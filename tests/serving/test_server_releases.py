"""The table of tensorflow/serving releases and the tensorflow-text ops they link."""

from __future__ import annotations

from albert_tf.serving import server_releases as sr


def test_the_oldest_release_that_links_every_op():
    assert sr.oldest_release([]) == "2.10.0"
    assert sr.oldest_release(["SentencepieceOp", "NormalizeUTF8"]) == "2.10.0"
    assert sr.oldest_release(["SentencepieceOp", "TFText>FastSentencepieceTokenize"]) == "2.12.0"
    # serving#2267: 2.12-2.19 link tensorflow-text 2.12.1's ops_lib, without the trimmers.
    assert sr.oldest_release(["TFText>FastSentencepieceTokenize", "TFText>RoundRobinTrim"]) \
        == "2.20.0"
    assert sr.oldest_release(["TFText>SomethingNew"]) is None
    assert sr.image("2.20.0") == "tensorflow/serving:2.20.0"
    # Every release's pin has a row of ops, and the rows only grow.
    rows = [sr.OPS_LIB[text] for _, text in sr.SERVING_RELEASES]
    assert all(a <= b for a, b in zip(rows, rows[1:]))
