"""The released ALBERT checkpoints: one table of names, handles and what each holds.

`RELEASED` is the one home of what albert-tf knows about the checkpoints people
already have: the google-research v1 and v2 English models, the four Chinese
models (WordPiece on vocab_chinese.txt), the KerasHub presets and the fine-tuned
Hugging Face models people use most. Each entry names the handles it can be read
from (the first is the one a bare name resolves to: `from_preset("albert_base_v2")`
is `from_preset("hf://albert/albert-base-v2")`), its architecture (a preset of
`AlbertConfig`) and vocabulary size, so its parameter count is computed, not
restated; its tokenizer kind and casing; and the original release's archive where
there is one (for reading only: albert-tf never downloads it).

`albert-tf presets` prints the table; `find_released(name)` looks a name up (its
KerasHub-style aliases too) and `suggest(name)` gives the closest names for a typo.
No TensorFlow, no Keras.
"""

from __future__ import annotations

import dataclasses
import difflib
import json

from albert_tf.config import AlbertConfig
from albert_tf.infra import arguments, cli
from albert_tf.tokenizer.kinds import SENTENCEPIECE, WORDPIECE  # the tokenizer kinds' one home

__all__ = ["Released", "RELEASED", "find_released", "suggest", "main"]

_ARCHIVES = "https://storage.googleapis.com/albert_models/"
_ENGLISH_VOCAB, _CHINESE_VOCAB = 30000, 21128


@dataclasses.dataclass(frozen=True)
class Released:
    """One released checkpoint.

    name: albert-tf's name for it (`from_preset(name)`, `--checkpoint name`).
    architecture: the `AlbertConfig` preset of its encoder ("albert-base", ...).
    vocab_size: its vocabulary's size (with `architecture`, the parameter count).
    tokenizer: "sentencepiece" (spiece.model / 30k-clean.model) or "wordpiece" (vocab.txt).
    cased: whether its vocabulary keeps case (every released ALBERT is uncased).
    language, task, description: what it is ("pretraining" or a fine-tuned task).
    handles: where it can be read from, the default first (hf://ORG/NAME, kaggle://...).
    aliases: other names it goes by (KerasHub's preset names).
    archive: the original release's archive (TF1 layout), to download by hand.
    """

    name: str
    architecture: str
    vocab_size: int
    tokenizer: str
    language: str
    task: str
    description: str
    handles: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    archive: str = ""
    cased: bool = False

    @property
    def config(self) -> AlbertConfig:
        return AlbertConfig.from_size(self.architecture, vocab_size=self.vocab_size)

    @property
    def parameters(self) -> int:
        """The encoder's weight count (pooler included), heads not counted."""
        return self.config.encoder_parameters()

    @property
    def handle(self) -> str:
        return self.handles[0]


def _english(size: str, version: int, kerashub: str = "", kaggle_version: int = 0) -> Released:
    hub = (f"kaggle://keras/albert/keras/{kerashub}/{kaggle_version}",) if kerashub else ()
    return Released(
        name=f"albert_{size}_v{version}", architecture=f"albert-{size}",
        vocab_size=_ENGLISH_VOCAB, tokenizer=SENTENCEPIECE, language="en", task="pretraining",
        description=f"google-research ALBERT {size} v{version} (MLM + SOP; v2: no dropout, "
                    "more data, longer training)" if version == 2 else
                    f"google-research ALBERT {size} v1 (MLM + SOP)",
        handles=(f"hf://albert/albert-{size}-v{version}",) + hub,
        aliases=(kerashub,) if kerashub else (),
        archive=f"{_ARCHIVES}albert_{size}_v{version}.tar.gz" if version == 2 else "")


def _chinese(size: str) -> Released:
    return Released(
        name=f"albert_{size}_zh", architecture=f"albert-{size}", vocab_size=_CHINESE_VOCAB,
        tokenizer=WORDPIECE, language="zh", task="pretraining",
        description=f"google-research ALBERT {size} Chinese (WordPiece on vocab_chinese.txt; "
                    "the Hugging Face copy's card: use BertTokenizer)",
        handles=(f"hf://voidful/albert_chinese_{size}",),
        archive=f"{_ARCHIVES}albert_{size}_zh.tar.gz")


# KerasHub's presets are its conversions of the v2 TF-Hub modules (keras-hub's
# albert_presets.py names them and their Kaggle versions).
_KERASHUB = {"base": ("albert_base_en_uncased", 5), "large": ("albert_large_en_uncased", 3),
             "xlarge": ("albert_extra_large_en_uncased", 3),
             "xxlarge": ("albert_extra_extra_large_en_uncased", 3)}

RELEASED: tuple[Released, ...] = (
    *(_english(size, 1) for size in _KERASHUB),
    *(_english(size, 2, *_KERASHUB[size]) for size in _KERASHUB),
    *(_chinese(size) for size in _KERASHUB),
    Released(name="albert_base_v2_squad2", architecture="albert-base",
             vocab_size=_ENGLISH_VOCAB, tokenizer=SENTENCEPIECE, language="en", task="span",
             description="albert_base_v2 fine-tuned on SQuAD 2.0 (twmkn9)",
             handles=("hf://twmkn9/albert-base-v2-squad2",)),
    Released(name="albert_xlarge_v2_squad2", architecture="albert-xlarge",
             vocab_size=_ENGLISH_VOCAB, tokenizer=SENTENCEPIECE, language="en", task="span",
             description="albert_xlarge_v2 fine-tuned on SQuAD 2.0 (ktrapeznikov)",
             handles=("hf://ktrapeznikov/albert-xlarge-v2-squad-v2",)),
    Released(name="albert_base_v2_imdb", architecture="albert-base",
             vocab_size=_ENGLISH_VOCAB, tokenizer=SENTENCEPIECE, language="en",
             task="classification",
             description="albert_base_v2 fine-tuned on IMDB sentiment, 2 classes (TextAttack)",
             handles=("hf://textattack/albert-base-v2-imdb",)),
)

_BY_NAME = {name: entry for entry in RELEASED for name in (entry.name, *entry.aliases)}


def find_released(name: str) -> Released | None:
    """The entry called `name` (albert-tf's name or an alias), or None."""
    return _BY_NAME.get(name)


def suggest(name: str) -> list[str]:
    """The released names closest to `name` (a typo's likely meaning), best first."""
    return difflib.get_close_matches(name, list(_BY_NAME), n=3, cutoff=0.6)


def _rows(entries) -> list[dict]:
    return [{"name": e.name, "parameters": e.parameters, "tokenizer": e.tokenizer,
             "cased": e.cased, "language": e.language, "task": e.task,
             "handles": list(e.handles), "aliases": list(e.aliases), "archive": e.archive,
             "description": e.description} for e in entries]


@cli.command("presets")
def main(argv: list[str]) -> int:
    parser = arguments.ArgumentParser(
        prog="albert-tf presets",
        description="the released ALBERT checkpoints albert-tf knows by name: "
                    "from_preset(NAME) and --checkpoint NAME read the first handle")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    args = parser.parse_args(argv)
    rows = _rows(RELEASED)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    width = max(len(r["name"]) for r in rows)
    print(f"{'name':<{width}}  {'params':>7}  {'tokenizer':<13}  {'lang':<4}  {'task':<14}  handles")
    for r in rows:
        names = ", ".join(r["handles"] + [f"alias {a}" for a in r["aliases"]])
        print(f"{r['name']:<{width}}  {r['parameters'] / 1e6:>6.1f}M  {r['tokenizer']:<13}  "
              f"{r['language']:<4}  {r['task']:<14}  {names}")
    print("\nParameters: the encoder with its pooler (heads not counted). hf:// handles need "
          "huggingface_hub and kaggle:// kagglehub (pip install 'albert-tf[hub]'); a local "
          "directory of the same name is read instead when it exists. Original archives "
          "(TF1 layout, download by hand): `albert-tf presets --json`.")
    return 0
