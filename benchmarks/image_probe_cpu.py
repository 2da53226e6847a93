"""CPU of datalint's image probe over a folder, in one process: the figure that compares versions.

    PYTHONPATH=<checkout> python benchmarks/image_probe_cpu.py /tmp/corpus500/images

Warms the decoders up on the first 20 files, then probes every file once and prints the
process CPU time (`time.process_time`), which a loaded machine disturbs less than wall time. Run it
alternately with two checkouts on PYTHONPATH to compare them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from datalint.scan.images import ImageOptions, StderrCapture, probe_image_file, warm_up_decoders


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="image files (searched recursively)")
    args = parser.parse_args(argv)
    files = sorted(path for path in args.folder.rglob("*") if path.is_file())
    warm_up_decoders()
    capture, options = StderrCapture(), ImageOptions()
    for path in files[:20]:
        probe_image_file(path, options, capture)
    started = time.process_time()
    for path in files:
        probe_image_file(path, options, capture)
    print(f"{len(files)} files: {time.process_time() - started:.3f} s of CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
