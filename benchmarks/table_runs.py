"""What the table benchmarks (bench_model.py, bench_pretrain.py) share: each measurement in a
child process of the script (`--one SPEC`), and the end of a table (its summary lines, then
the rows as JSON, written under a temporary name and renamed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run_child(script: str, spec: dict) -> tuple[object, str | None]:
    """Runs `script --one SPEC`; returns (the JSON of its last stdout line, None), or (None,
    the last line of its stderr) when it failed."""
    out = subprocess.run([sys.executable, script, "--one", json.dumps(spec)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return None, lines[-1] if lines else "failed"
    return json.loads(out.stdout.strip().splitlines()[-1]), None


def finish(summary: list[str], peak, rows: list[dict], json_path: str | None) -> int:
    """Prints the summary lines; writes {"matmul_peak_tflops": peak, "rows": rows} to
    `json_path` if given."""
    print()
    for line in summary:
        print(line)
    if json_path:
        with open(json_path + ".tmp", "w") as f:
            json.dump({"matmul_peak_tflops": peak, "rows": rows}, f, indent=1)
        os.replace(json_path + ".tmp", json_path)
    return 0
