"""Run every benchmark script in bench/ (one process each) and collect bench/results.json."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    results = HERE / "results.json"
    results.unlink(missing_ok=True)
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n### {script.name}", flush=True)
        code = subprocess.call([sys.executable, str(script)], cwd=HERE)
        failed += code != 0
    print(f"\nfigures written to {results}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
