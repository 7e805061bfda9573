"""Real files of google-research/albert's layout (tests/data/real/google_albert): the v2
albert_config.json of the base and large releases (dropout written as the integer 0) and a
real 30,000-piece SentencePiece model trained with ALBERT's conventions (Vietnamese
Wikipedia, `albertvi_30k-clean.model`): read by our readers, tokenized in Python as the
original `tokenization.py` rules on the sentencepiece package give, and in the graph as in
Python."""

from __future__ import annotations

import json
import os

import pytest
import sentencepiece as spm

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from albert_tf.tokenizer.spm import AlbertTokenizer
from tests.helpers.paths import REAL
from tests.helpers.tokenizer_cases import HARD_CASES
from tests.model.test_tokenizer import reference_encode_pieces, reference_preprocess
from tests.model.test_tokenizer_graph import _mismatches

GOOGLE = os.path.join(REAL, "google_albert")
SPM_MODEL = os.path.join(GOOGLE, "albertvi_30k-clean.model")

VIETNAMESE = [
    "Hà Nội là thủ đô của nước Cộng hòa Xã hội chủ nghĩa Việt Nam.",
    "Thành phố Hồ Chí Minh có khoảng 9,3 triệu dân vào năm 2023.",
    "Sông Mê Kông chảy qua sáu quốc gia trước khi đổ ra Biển Đông.",
    "Ngày 2 tháng 9 năm 1945, Chủ tịch Hồ Chí Minh đọc bản Tuyên ngôn Độc lập.",
    "Phở bò là món ăn nổi tiếng nhất của ẩm thực Việt Nam.",
    "ALBERT là một mô hình ngôn ngữ được Google công bố năm 2019.",
    "Giá xăng tăng 1.250 đồng/lít, lên mức 23.450 đồng (từ 15h chiều nay).",
    "Vịnh Hạ Long được UNESCO công nhận là Di sản Thiên nhiên Thế giới.",
    "“Không có gì quý hơn độc lập, tự do” — câu nói nổi tiếng.",
    "Đội tuyển bóng đá Việt Nam thắng 3–1 trong trận chung kết AFF Cup.",
]


def test_released_v2_configs_load_with_the_papers_counts():
    # The paper's Table 1: ALBERT base 12M, large 18M parameters (V 30k, E 128).
    for name, hidden, layers, millions in (("base", 768, 12, 12), ("large", 1024, 24, 18)):
        path = os.path.join(GOOGLE, f"albert_config_{name}_v2.json")
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        assert raw["hidden_dropout_prob"] == 0 and isinstance(raw["hidden_dropout_prob"], int)
        config = AlbertConfig.from_json_file(path)
        assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (
            hidden, layers, 30000)
        assert config.hidden_dropout_prob == 0.0
        assert round(config.encoder_parameters() / 1e6) == millions
        assert AlbertEncoder(config).count_params() == config.encoder_parameters()


def test_the_real_model_tokenizes_as_the_original_rules():
    tok, sp = AlbertTokenizer(SPM_MODEL), spm.SentencePieceProcessor(model_file=SPM_MODEL)
    assert tok.vocab_size == 30000
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    lines = VIETNAMESE + list(HARD_CASES)
    for line in lines:
        want = reference_encode_pieces(sp, reference_preprocess(line, lower=True))
        assert tok.tokenize(line) == want, line
    # Lower-cased, accents stripped as the original (a Vietnamese model keeps few accents).
    assert tok.tokenize("Hà Nội")[:1] == ["▁ha"]


@pytest.mark.parametrize("keep_accents", [False, True])
def test_the_graph_equals_python_on_the_real_model(keep_accents):
    pre = AlbertPreprocessor(SPM_MODEL, seq_length=64, keep_accents=keep_accents)
    texts = VIETNAMESE + [t for t in HARD_CASES if isinstance(t, str)]
    assert not _mismatches(pre, texts)
    assert not _mismatches(pre, VIETNAMESE, VIETNAMESE[::-1])
