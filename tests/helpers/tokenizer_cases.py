"""Text for the tokenizer parity tests: hand-written hard cases plus varied real sentences.

`parity_lines(documents)` mixes real English from the embedded corpus with
deterministic variants of it (case, accents, quotes, numbers with commas, CJK,
emoji, control characters, odd whitespace, very long lines) and `HARD_CASES`.
"""

from __future__ import annotations

import random

HARD_CASES = [
    # empty and whitespace only
    "", " ", "\t", "\n", "   \t \n  ", "\u00a0", "\u3000", "\u2028\u2029", "\x1c\x1d\x1e\x1f", "\x85",
    # case and accents
    "Hello World", "HELLO WORLD", "hello world", "Ünïcödé ÇÀÉÎÕÛ ñ ß ẞ ø Ø æ Æ œ Œ",
    "Crème brûlée à la française", "naïve café résumé coöperate", "São Paulo, Zürich, Kraków, Øresund",
    "İstanbul ıI İi", "Dž dž ǅ ǈ ǋ", "ﬁne ﬂow ﬀ ﬃ", "Ａｂｃ １２３ ＡＢＣ",
    "e\u0301 a\u0308 o\u0302 u\u0328 combining marks", "\u0301\u0301\u0301", "x\u034fy grapheme joiner",
    "Việt Nam Tiếng Việt", "हिन्दी भाषा", "ภาษาไทย", "한국어 텍스트 한글", "Ελληνικά ΟΔΟΣ ΣΟΦΟΣ",
    "ΑΣ ΑΣ. ΑΣ' ΑΣ'Β Σ ΣΑ ΑΣΣ Α\u0301Σ Α\u0345Σ ΑΣ\u0301", "Русский ЯЗЫК ёЁ", "עברית العربية",
    # typographic and ASCII quotes
    "``quoted'' text", "“curly” ‘single’ „low“ «guillemets» ‹single›", "it's don't ‘tis",
    "'' `` ' ` \"", "He said, \"no\" -- and left…", "em—dash en–dash – — ‐ ‑ ‒",
    # numbers with commas (the digit-comma rule)
    "1,000,000", "3,", "x3,", "costs 1,000, then 2,000,", "items 1, 2, 3, 4, 5,", "a1,b2,c3,",
    "In 1998, 2,500 people paid £3,000, €4,500, and $5,000,000,",
    "(1, 2), [3, 4], {5, 6},", "3,,", "3, ,", ",3,", "0,0,0,", "9,999,999,999,",
    "١٢٣, ۴۵۶, ४५६, ፩, ①, ²,", "12.5, 3.14, 1e10, 0x1F,", "version 3.11.4, build 2024,",
    # punctuation and symbols
    "!!!???...;;;:::", "()[]{}<>@#$%^&*_+=|\\/~", "a-b_c.d,e;f:g", "£€¥₹₩¢ ©®™ °±×÷",
    "e.g., i.e., etc., vs.", "email@example.com https://example.com/path?q=1&r=2#frag",
    # CJK and emoji
    "日本語のテキストです。", "中文文本，标点符号。", "漢字かなカナ混じり文", "𠀋𡈽𡌛 extension B",
    "😀 😃 👍🏽 👨‍👩‍👧‍👦 🇯🇵 ❤️", "emoji😀inside words👍", "♠♣♥♦ ☃ ☂ ⚡",
    # control and format characters
    "a\x00b", "\x00", "tab\there", "line\nbreak", "cr\rlf\r\n", "\x07bell\x08back", "\x7f del",
    "zero\u200bwidth\u200cjoiner\u200d", "\ufeffbom", "\u00adsoft hyphen", "rtl \u202emark\u202c",
    "\ufffd replacement", "private \ue000\uf8ff", "noncharacter \ufdd0\uffff",
    # mixed
    "The Quick Brown Fox Jumps Over The Lazy Dog, 1,234 Times!",
    "MixedCASE camelCase snake_case SCREAMING_CASE kebab-case",
    "   leading and trailing   spaces   ", "multiple\t\ttabs  and   spaces\n\nnewlines",
    "[CLS] [SEP] [MASK] <pad> <unk> ▁ ▁▁ ▁x",
]

# Bytes that are not valid UTF-8, for the in-graph replacement rule.
INVALID_UTF8 = [
    b"\xff", b"\xfe\xff", b"a\xc3", b"\xc3(", b"\xed\xa0\x80", b"\xe2\x82", b"\xe2\x82x",
    b"\xf0\x9f\x98", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80", b"\xf4\x90\x80\x80", b"ok\x80\x80ok",
    b"\xe0\x80\x80", b"caf\xe9 latin-1", b"\xef\xbf\xbe", b"A\xffB C\xfeD", b"1,0\xff00,",
]

_ACCENTS = {"a": "á", "e": "é", "i": "ï", "o": "ô", "u": "ü", "c": "ç", "n": "ñ",
            "A": "Å", "E": "È", "O": "Ö"}
_INSERTS = ["日本語", "😀", "👍🏽", "中文", "\t", "\u00a0", "\u200b", "\x00", "\x07", "€", "ΣΑΣ",
            "``", "''", "“", "”", "…", "ﬁ", "２", "\u0301", "\ufffd", "  "]


def _number(rng: random.Random) -> str:
    value = rng.choice([rng.randint(0, 99), rng.randint(100, 10**4), rng.randint(10**4, 10**9)])
    return f"{value:,}" if rng.random() < 0.7 else str(value)


def _variant(sentence: str, rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return sentence.upper()
    if kind == 1:
        return sentence.title()
    if kind == 2:
        return "".join(_ACCENTS.get(c, c) if rng.random() < 0.3 else c for c in sentence)
    if kind == 3:
        return f"``{sentence}'' “{sentence[:20]}”"
    words = sentence.split(" ")
    for _ in range(rng.randint(1, 4)):
        position = rng.randrange(len(words) + 1)
        if kind in (4, 5):
            words.insert(position, _number(rng) + rng.choice([",", ", ", ",,", ""]))
        else:
            words.insert(position, rng.choice(_INSERTS))
    joiner = rng.choice([" ", "  ", "\t", " \n "]) if kind == 7 else " "
    return joiner.join(words)


def parity_lines(documents: list[list[str]], real: int = 2000, variants: int = 1500,
                 long_lines: int = 20, seed: int = 0) -> list[str]:
    """About `real + variants + long_lines + len(HARD_CASES)` lines of varied text.

    Args:
      documents: lists of sentences (the embedded corpus).
      real: sentences taken as they are.
      variants: sentences rewritten by `_variant` (case, accents, quotes, numbers, inserts).
      long_lines: lines of 40 to 80 joined sentences (thousands of characters).
    """
    rng = random.Random(seed)
    sentences = [s for doc in documents for s in doc]
    if len(sentences) < real:
        raise ValueError(f"need {real} sentences, the documents have {len(sentences)}")
    lines = list(HARD_CASES)
    lines += sentences[:real]
    lines += [_variant(rng.choice(sentences), rng) for _ in range(variants)]
    for _ in range(long_lines):
        start = rng.randrange(len(sentences))
        lines.append(" ".join(sentences[start:start + rng.randint(40, 80)]))
    return lines

# Scripts and characters WordPiece treats specially (CJK ideographs, BERT's punctuation,
# control and zero-width characters, accents, over-long words), for its parity tests.
WORDPIECE_CASES = [
    # Chinese, simplified and traditional; CJK extensions and compatibility ideographs
    "我爱北京天安门。", "今天天气很好，我们去公园散步吧！", "自然语言处理是人工智能的一个分支",
    "這是繁體中文的句子，請多指教。", "臺灣、香港與澳門的傳統寫法", "㐀㐁㐂 extension A 𠀀𠀁 B 𪜀 C 𫝀 D 𫠠 E",
    "豈更車 compatibility 丽丸乁", "中文English混合text测试123号", "ALBERT模型在中文任务上的表现",
    "他说：“你好！”然后离开了……", "《红楼梦》（曹雪芹）【第一回】", "价格是￥1,234.56元，约合$200",
    # Japanese kana, Korean hangul (not split like ideographs)
    "ひらがなとカタカナ", "日本語の文章を書きます。", "ｶﾀｶﾅ半角", "東京タワーは333メートルです",
    "한국어 문장입니다. 안녕하세요!", "대한민국의 수도는 서울이다", "ㄱㄴㄷ ᄀᄁᄂ 한글 자모",
    # full-width forms and compatibility characters
    "ＡＢＣ ａｂｃ ０１２３ ！？（）［］", "Ｈｅｌｌｏ，Ｗｏｒｌｄ！", "ﬁ ﬂ Ⅻ ① ㈱ ㎏ ™",
    # emoji and symbols
    "😀😃😄 👍🏽 👨‍👩‍👧 🇨🇳🇯🇵", "我❤️你😀！", "♠♣ ☃ ⚡ ∑∫√ ← → ↑",
    # combining marks, accents, case
    "e\u0301 a\u0308 n\u0303 Cafe\u0301 Re\u0301sume\u0301", "Crème Brûlée ÀÉÎÕÜ", "ÅNGSTRÖM Å Ω",
    "İSTANBUL ıi", "ΣΊΣΥΦΟΣ ΟΔΟΣ", "Ǆ ǅ ǆ ß ẞ", "\u0301\u0308 lone marks",
    # control, format and zero-width characters
    "a\u200bb\u200cc\u200dd", "\ufeffstart", "soft\u00adhyphen", "tab\tnew\nline\rreturn",
    "ctrl\x01\x02\x03\x1b[0m", "del\x7f \x85next", "para\u2028line\u2029sep", "nbsp\u00a0thin\u2009ideo\u3000",
    "rtl\u202eevil\u202c", "\ufffd\ufffd", "nul\x00byte",
    # mixed scripts and punctuation
    "Hello, 世界! Привет, мир! مرحبا بالعالم", "BERT的tokenizer会把标点符号，比如“、”。拆开",
    "2024年1月1日 10:30 AM", "www.example.com/中文/路径?q=测试", "C++ & C# are ~languages~ ^_^",
    "$100 #tag @user `code` |pipe| \\back\\", "《》〈〉「」『』【】〔〕", "〜～・…‥", "¡¿«»‹›§¶†‡",
    # over-long words (> 100 characters) and near the limit
    "a" * 100, "a" * 101, "supercalifragilistic" * 6, "x" + "é" * 99, "中" * 150,
    "short " + "b" * 120 + " words",
]
