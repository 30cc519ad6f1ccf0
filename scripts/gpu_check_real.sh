#!/usr/bin/env bash
# GPU check of the real-model path (about a minute on one GPU): see scripts/gpu_check_real.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHONPATH=. exec "${PYTHON:-python}" scripts/gpu_check_real.py "$@"
