"""`albert-tf params`: parameter counts of the paper's configurations, next to the paper's."""

from __future__ import annotations

import math

from albert_tf.config import PAPER_PARAMETERS, AlbertConfig
from albert_tf.infra import arguments, cli


def encoder_parameters(config: AlbertConfig) -> int:
    """Exact encoder parameter count (with pooler) for a config, without building it
    (`AlbertConfig.encoder_parameters`)."""
    return config.encoder_parameters()


def parameter_table(build: bool = False) -> list[tuple[str, int, str]]:
    rows = []
    for name in AlbertConfig.size_names():
        config = AlbertConfig.from_size(name)
        if build:
            from albert_tf import AlbertEncoder

            count = sum(math.prod(w.shape) for w in AlbertEncoder(config).weights)
        else:
            count = encoder_parameters(config)
        rows.append((name, count, PAPER_PARAMETERS[name]))
    return rows


@cli.command("params")
def main(argv: list[str]) -> int:
    parser = arguments.ArgumentParser(prog="albert-tf params", description=__doc__)
    parser.add_argument("--build", action="store_true",
                        help="build each encoder in Keras and count its weights (slower)")
    parser.add_argument("--config", help="also count an albert_config.json / HF config.json")
    args = parser.parse_args(argv)
    rows = parameter_table(build=args.build)
    if args.config:
        config = AlbertConfig.from_size_or_file(args.config)
        rows.append((args.config, encoder_parameters(config), "-"))
    width = max(len(r[0]) for r in rows)
    print(f"{'model':<{width}}  {'parameters':>13}  {'':>7}  paper")
    for name, count, paper in rows:
        print(f"{name:<{width}}  {count:>13,}  {count / 1e6:>6.1f}M  {paper}")
    print("\nEncoder with pooler, V=30000 (the paper's heads are not counted). xxlarge counts "
          "223M, not\nthe paper's 235M: its architecture (H=4096, 12 layers, E=128, all shared) "
          "gives 222.6M.")
    return 0
