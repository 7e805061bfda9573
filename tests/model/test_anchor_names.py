"""The anchors' names: `sequence_length` (KerasHub's) is `seq_length` on the preprocessor and
the task models, read and set, under the one length rule; a mistyped setting on a
preprocessor is an error, not a new attribute; a tokenizer called with names="hf" gives
Hugging Face's key names."""

from __future__ import annotations

import os

import numpy as np
import pytest

from albert_tf import AlbertSequenceClassifier
from albert_tf.errors import UserError
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from albert_tf.tokenizer.spm import AlbertTokenizer
from tests.helpers.paths import TASK_FIXTURES

CLASSIFIER = os.path.join(TASK_FIXTURES, "seq_single", "hf")
SPM = os.path.join(CLASSIFIER, "spiece.model")
TEXTS = ["A gripping, funny film that runs on and on and on.", "Dull.", ""]


def test_setting_the_preprocessors_sequence_length_repacks():
    pre = AlbertPreprocessor(SPM, seq_length=16)
    assert pre.sequence_length == 16
    pre.sequence_length = 9
    assert pre.seq_length == 9
    ids = pre(TEXTS)
    assert all(v.shape == (3, 9) for v in ids.values())
    assert AlbertPreprocessor(SPM, 9)(TEXTS)["input_word_ids"].numpy().tolist() == \
        ids["input_word_ids"].numpy().tolist()
    with pytest.raises(UserError, match=r"seq_length=2 must be an integer from 3"):
        pre.sequence_length = 2
    assert pre.seq_length == 9 and pre.get_config()["seq_length"] == 9


def test_a_mistyped_setting_on_a_preprocessor_is_refused():
    pre = AlbertPreprocessor(SPM, seq_length=16)
    with pytest.raises(AttributeError, match="AlbertPreprocessor has no setting "
                                             "'sequence_lenght'"):
        pre.sequence_lenght = 64
    assert not hasattr(pre, "sequence_lenght") and pre.seq_length == 16
    pre.do_lower_case = pre.do_lower_case  # an existing attribute may be set
    pre._private_note = 1  # private attributes are the class's own business


def test_a_task_models_sequence_length_is_its_preprocessors_and_its_records():
    model = AlbertSequenceClassifier.from_preset(CLASSIFIER)
    assert model.sequence_length == model.seq_length == model.preprocessor.seq_length == 64
    first = model.predict(TEXTS, verbose=0)
    model.sequence_length = 12
    assert model.preprocessor.sequence_length == 12 and model.task_record.seq_length == 12
    shorter = model.predict(TEXTS, verbose=0)  # packed to 12 now: the long text is cut
    ids = {k: v.numpy() for k, v in model.preprocessor(TEXTS).items()}
    assert ids["input_word_ids"].shape == (3, 12)
    np.testing.assert_allclose(shorter, model.predict(ids, verbose=0), atol=1e-6, rtol=0)
    np.testing.assert_allclose(shorter[1:], first[1:], atol=1e-5, rtol=0)  # short rows alike
    assert not np.allclose(shorter[0], first[0], atol=1e-5)
    with pytest.raises(UserError, match=r"seq_length=65 must be an integer from 3 .* to "
                                        r"max_position_embeddings=64"):
        model.sequence_length = 65
    assert model.seq_length == 12


def test_the_tokenizer_called_hf_style_gives_hf_names():
    tok = AlbertTokenizer(SPM)
    ours = tok(TEXTS, return_tensors="np")
    theirs = tok(TEXTS, return_tensors="np", names="hf")
    assert list(theirs) == ["input_ids", "attention_mask", "token_type_ids"]
    for mine, hf in zip(ours.values(), theirs.values()):
        np.testing.assert_array_equal(mine, hf)
    pair = tok("a question", "its passage", names="hf", return_offsets_mapping=True)
    assert set(pair) == {"input_ids", "attention_mask", "token_type_ids", "offset_mapping"}
    with pytest.raises(ValueError, match=r"names='HF' is not one of \('albert', 'hf'\)"):
        tok(TEXTS, names="HF")
