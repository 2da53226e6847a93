#!/usr/bin/env bash
# `make demo`: the main job on the bundled fixtures.
#   1. lint a fixture training pipeline (findings of several rule families),
#   2. scan a fixture dataset with planted faults (crash, error, NaN, bad label, ...) in isolated workers,
#   3. scan a folder of images with damaged files,
#   4. write one HTML report.
# datalint exits 1 when it finds something; here that is the expected outcome, so only 2+ fails the demo.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
OUT=out/demo
mkdir -p "$OUT"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
allow_findings() { local rc=$?; [ "$rc" -le 1 ] || { echo "demo failed (exit $rc)"; exit "$rc"; }; }

step "datalint check fixtures/lint/demo"
$BIN/datalint check fixtures/lint/demo --format json --output-file "$OUT/lint.json" --exit-zero 2>/dev/null
$BIN/datalint check fixtures/lint/demo; allow_findings

step "datalint scan --dataset fixtures/datasets/demo.py:demo"
$BIN/datalint scan --dataset fixtures/datasets/demo.py:demo --label label --num-classes 10 \
    --timeout 10 --rescan --db "$OUT/demo.db" --quarantine "$OUT/demo.quarantine.json" --progress plain
allow_findings

step "datalint scan --images (a generated folder with damaged files)"
$BIN/python benchmarks/image_corpus.py --small "$OUT/corpus" >/dev/null
$BIN/datalint scan --images "$OUT/corpus/images" --rescan --db "$OUT/images.db" \
    --quarantine "$OUT/images.quarantine.json" --progress plain
allow_findings

step "datalint report"
$BIN/datalint report "$OUT/demo.db" -o "$OUT/report.html" --lint "$OUT/lint.json"; allow_findings
$BIN/datalint report "$OUT/images.db" -o "$OUT/images.html" --image-root "$OUT/corpus/images"; allow_findings

step "done"
echo "quarantine lists: $OUT/demo.quarantine.json $OUT/images.quarantine.json"
echo "reports:          $OUT/report.html $OUT/images.html"
