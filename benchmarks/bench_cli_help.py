"""`albert-tf COMMAND --help`: wall time and the heavy packages it imports, per command.

Each command's help is asked for in a fresh process through the installed entry point
(`albert-tf`, the console script beside this interpreter), --repeats times; the table
prints the median and the slowest wall time, the median CPU time, and the heavy packages (TensorFlow, JAX,
Keras, tensorflow_text, apache_beam, torch) that process imported, read from
`python -X importtime`'s report in a separate run.

    python benchmarks/bench_cli_help.py                 # every command, 3 repeats
    python benchmarks/bench_cli_help.py --commands export predict --repeats 5
    python benchmarks/bench_cli_help.py --typo   # `COMMAND --chekpoint x`: the refusal instead

Take the figures on a quiet machine: the table prints the load average and CPU flags.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

HEAVY = ("tensorflow", "tensorflow_text", "jax", "keras", "apache_beam", "torch")


def _entry_point() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "albert-tf")
    return [script] if os.path.exists(script) else [shutil.which("albert-tf") or "albert-tf"]


def _commands() -> list[str]:
    from albert_tf.infra.cli import COMMANDS

    return list(COMMANDS)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# A mistyped option (`--typo`): every command refuses it, before TensorFlow loads.
TYPO = ("--chekpoint", "x")


def wall_seconds(command: str, typo: bool = False) -> tuple[float, float]:
    """(wall, CPU) seconds of one `albert-tf COMMAND --help` (`typo`: `COMMAND --chekpoint
    x`, refused); CPU time varies less with the machine's load than wall time does."""
    cpu, start = _children_cpu(), time.perf_counter()
    result = subprocess.run([*_entry_point(), command, *(TYPO if typo else ("--help",))],
                            capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _children_cpu() - cpu
    answered = (result.returncode == 2 and f"unrecognized option {TYPO[0]}" in result.stderr
                if typo else result.returncode == 0 and "usage:" in result.stdout)
    if not answered:
        raise SystemExit(f"albert-tf {command} {'typo' if typo else '--help'} failed: "
                         f"{result.stderr[-500:]}")
    return elapsed, cpu


def heavy_imports(command: str, typo: bool = False) -> list[str]:
    """The HEAVY top-level packages `albert-tf COMMAND --help` (or the typo) imports
    (-X importtime)."""
    code = "import sys; from albert_tf.infra.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", code, command,
                             *(TYPO if typo else ("--help",))],
                            capture_output=True, text=True)
    names = set()
    for line in result.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", line)
        if match:
            names.add(match.group(1).split(".")[0])
    return sorted(names & set(HEAVY))


def cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "unknown"
    model = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    wanted = ("avx", "avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "fma")
    have = [f for f in wanted if flags and f in flags.group(1).split()]
    return f"{model.group(1) if model else '?'}; {os.cpu_count()} CPUs; {' '.join(have)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", nargs="+", default=None, help="default: every command")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--typo", action="store_true",
                        help="time `COMMAND --chekpoint x` (refused) instead of --help")
    args = parser.parse_args(argv)
    commands = args.commands or _commands()
    print(f"# CPU: {cpu_flags()}")
    print(f"# load average before: {os.getloadavg()[0]:.2f}")
    print(f"{'command':<12} {'wall median s':>13} {'wall max s':>10} {'CPU median s':>12}  "
          "heavy imports")
    for command in commands:
        runs = [wall_seconds(command, args.typo) for _ in range(args.repeats)]
        wall, cpu = [r[0] for r in runs], [r[1] for r in runs]
        heavy = heavy_imports(command, args.typo)
        print(f"{command:<12} {statistics.median(wall):>13.2f} {max(wall):>10.2f} "
              f"{statistics.median(cpu):>12.2f}  {', '.join(heavy) or '-'}", flush=True)
    print(f"# load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
