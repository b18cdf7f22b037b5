#!/usr/bin/env bash
# The offline main job: embedded sample -> Hub-ready export -> baselines and a
# tiny random-weight model through the real runner -> leaderboard and figures.
# Caches stay inside the project (the library itself never sets HF_HOME).
# runs/demo belongs to this script: a re-run replaces its export and report
# (--overwrite) and resumes its finished runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="$PWD/.cache"
export HF_HOME="$cache/hf" MPLCONFIGDIR="$cache/matplotlib" NUMBA_CACHE_DIR="$cache/numba"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec .venv/bin/speecheq demo --output-dir runs/demo --overwrite "$@"
