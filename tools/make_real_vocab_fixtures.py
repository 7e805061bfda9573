"""Writes the reference fixtures of the real Chinese vocab.txt: transformers on the real file.

The vocabulary is tests/data/real/chinese_vocab/vocab.txt (21,128 lines; line 344 is U+2028,
see tests/data/real/README.md). Under tests/fixtures/chinese_vocab/:

  ids.json.gz   {"transformers": version, "lines": [...], "ids": [[ids]...]}: transformers'
                BertTokenizer (lower-cased, as the Chinese releases) on ordinary Chinese
                lines (`LINES` below) and on every line of the vocabulary read as text, in
                that order; no [CLS]/[SEP]; "[CLS]" typed in text split as text.
  hf/           a Hugging Face ALBERT classifier on that vocabulary, random weights, as
                `make_wordpiece_fixtures.write_model` makes it: config.json,
                model.safetensors and tokenizer_config.json (the tests put the real
                vocab.txt beside them: it is not copied here).
  reference.npz its texts and pairs, BertTokenizer's ids (seq 32) and transformers'
                probabilities in float64 (`make_wordpiece_fixtures.write_model`).

    /work/refvenv/bin/python tools/make_real_vocab_fixtures.py   # -> tests/fixtures/chinese_vocab

Needs transformers, tokenizers, torch and TensorFlow (the TF1 files it writes and drops).
Deterministic.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile

import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REAL_VOCAB = os.path.join(ROOT, "tests", "data", "real", "chinese_vocab", "vocab.txt")

# Ordinary Chinese as it is written: news-style sentences with dates, numbers, Latin words,
# full-width and half-width punctuation, traditional characters, quotes and brackets.
LINES = [
    "新华社北京3月5日电 第十四届全国人民代表大会第一次会议今天上午在人民大会堂开幕。",
    "国家统计局发布数据显示，2023年全年国内生产总值达到126万亿元，比上年增长5.2%。",
    "据报道，苹果公司（Apple Inc.）将于9月12日发布新款iPhone 15系列手机。",
    "上海浦东国际机场T2航站楼今日起恢复运营，首班航班MU5101于7:30起飞。",
    "中国女排在东京奥运会上以3:0战胜对手，赢得了比赛。",
    "记者从市教育局获悉，今年全市共有8.6万名考生参加高考，考点设在45所学校。",
    "他说：“我们要坚持以人民为中心的发展思想。”",
    "《人民日报》刊发评论员文章，题为《奋力谱写新篇章》。",
    "这家公司的CEO张伟表示，AI技术将改变各行各业。",
    "气象台预计，明天白天多云转阴，最高气温28℃，最低气温19℃。",
    "北京时间2024年7月27日凌晨，巴黎奥运会开幕式在塞纳河上举行。",
    "该项目总投资约3.5亿美元，预计于2025年底建成投产。",
    "微软、谷歌和亚马逊等科技巨头纷纷加大对云计算的投入。",
    "臺灣的夜市小吃非常有名，例如蚵仔煎和珍珠奶茶。",
    "香港特別行政區政府今日公布最新的施政報告。",
    "请访问www.example.com获取更多信息，或拨打客服电话400-123-4567。",
    "第一、坚持创新；第二、坚持协调；第三、坚持绿色。",
    "这本书共有12章，第3章讲述了机器学习的基本原理（包括SVM和CNN）。",
    "COVID-19疫情对全球经济造成了巨大冲击。",
    "他在GitHub上开源了一个用Python编写的自然语言处理工具包。",
    "今天是星期五，天气晴朗，适合出去走走……",
    "价格从￥1,299元降到了￥999元，优惠幅度超过20%！",
    "5G网络已经覆盖了全国所有地级市。",
    "她用英语说了一句“Good morning”，大家都笑了。",
    "人工智能（Artificial Intelligence，简称AI）是计算机科学的一个分支。",
    "深圳市南山区科技园的写字楼租金每平方米每月约150元。",
    "我爱北京天安门，天安门上太阳升。",
    "ＡＬＢＥＲＴ模型的参数量只有ＢＥＲＴ的十分之一。",
    "一行有\u2028行分隔符的文字，还有\u3000全角空格。",
    "日本語の文章と한국어 문장도 섞여 있습니다。",
]


def reference_ids(lines: list[str]) -> list[list[int]]:
    """BertTokenizer's ids on each line, on the real vocab.txt (lower-cased)."""
    tokenizer = transformers.BertTokenizer(REAL_VOCAB, do_lower_case=True,
                                           split_special_tokens=True)
    return [tokenizer.encode(line, add_special_tokens=False) for line in lines]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "chinese_vocab"))
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    from make_wordpiece_fixtures import write_model

    with open(REAL_VOCAB, encoding="utf-8", newline="") as f:
        vocab_lines = f.read().split("\n")[:-1]
    lines = LINES + vocab_lines
    payload = {"transformers": transformers.__version__, "lines": lines,
               "ids": reference_ids(lines)}
    os.makedirs(os.path.join(args.out, "hf"), exist_ok=True)
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    with open(os.path.join(args.out, "ids.json.gz"), "wb") as f:
        f.write(gzip.compress(data, mtime=0))
    with tempfile.TemporaryDirectory() as tmp:
        write_model(tmp, REAL_VOCAB)
        for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
            shutil.copyfile(os.path.join(tmp, "hf", name), os.path.join(args.out, "hf", name))
        shutil.copyfile(os.path.join(tmp, "reference.npz"),
                        os.path.join(args.out, "reference.npz"))
    print(f"{len(LINES)} lines and {len(vocab_lines)} vocabulary lines", file=sys.stderr)


if __name__ == "__main__":
    main()
