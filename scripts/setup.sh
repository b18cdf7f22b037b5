#!/usr/bin/env bash
# One-step setup for a fresh Debian machine: system packages, a virtual
# environment in .venv and SpeechEQ installed in editable mode.
# Idempotent: a second run only checks what is there.
#   bash scripts/setup.sh          # runtime + offline demo extras
#   bash scripts/setup.sh --dev    # also the test tools
set -euo pipefail
cd "$(dirname "$0")/.."

extras="eval,build"
[[ "${1:-}" == "--dev" ]] && extras="eval,build,api,dev"

# System packages: FFmpeg libraries for torchcodec, espeak-ng for the offline TTS.
need_apt=()
command -v espeak-ng >/dev/null 2>&1 || need_apt+=(espeak-ng)
command -v ffmpeg >/dev/null 2>&1 || need_apt+=(ffmpeg)
if ((${#need_apt[@]})); then
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

python=${PYTHON:-python3}
[[ -x .venv/bin/python ]] || "$python" -m venv .venv

stamp=".venv/.speecheq-installed-$extras"
digest=$(cat setup.cfg pyproject.toml | sha256sum | cut -c1-16)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$digest" ]]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # torch first and pinned: the CPU wheel. An unpinned torch pulls a multi-GB CUDA build.
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[$extras]"
  echo "$digest" > "$stamp"
fi
echo "SpeechEQ environment ready: $(pwd)/.venv (extras: $extras)"
