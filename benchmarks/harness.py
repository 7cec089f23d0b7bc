"""The benchmark harness, run from a checkout: the same as `kcodec bench`.

    python benchmarks/harness.py [--quick] [--json FILE] [--png FILE] [--workloads ID ...]

The code lives in kcodec/bench.py, which is installed with kcodec (benchmarks/
is not), so that `kcodec bench` works from a wheel; this file only re-exports
it for benchmarks/ and runs it. See kcodec.bench for the workload matrix, the
floors and how every figure is measured.
"""
import sys

from kcodec.bench import *  # noqa: F401,F403
from kcodec.bench import main, run  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
