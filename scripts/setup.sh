#!/usr/bin/env bash
# One-step setup for a fresh Debian machine: system packages, a virtual
# environment in .venv and SpeechEQ installed in editable mode.
# Idempotent: a second run only checks what is there (a second or two).
#   bash scripts/setup.sh          # runtime: dataset, metric, runner, offline demo
#   bash scripts/setup.sh --dev    # also API clients and the test tools
set -euo pipefail
cd "$(dirname "$0")/.."

extras="eval,build"
[[ "${1:-}" == "--dev" ]] && extras="eval,build,api,dev"

# System packages: FFmpeg libraries for torchcodec, espeak-ng for the offline
# TTS of the embedded sample, python3-venv for the virtual environment.
need_apt=()
command -v espeak-ng >/dev/null 2>&1 || need_apt+=(espeak-ng)
command -v ffmpeg >/dev/null 2>&1 || need_apt+=(ffmpeg)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  echo "Installing Debian packages: ${need_apt[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

python=${PYTHON:-python3}
[[ -x .venv/bin/python ]] || "$python" -m venv .venv

stamp=".venv/.speecheq-installed-${extras//,/-}"
digest=$(cat setup.cfg pyproject.toml | sha256sum | cut -c1-16)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$digest" ]]; then
  log=.venv/setup.log
  echo "Installing SpeechEQ[$extras] into .venv (log: $log) ..."
  {
    .venv/bin/python -m pip install --upgrade pip &&
    # torch first and pinned to 2.13.0: here that is the CPU wheel. An unpinned
    # torch pulls a multi-GB CUDA build (GPU users: see README, "GPU install").
    .venv/bin/python -m pip install "torch==2.13.0" &&
    .venv/bin/python -m pip install -e ".[$extras]"
  } >"$log" 2>&1 || { tail -n 40 "$log"; echo "setup failed: see $log" >&2; exit 1; }
  echo "$digest" > "$stamp"
fi
echo "SpeechEQ environment ready: $(pwd)/.venv (extras: $extras)"
