#!/usr/bin/env bash
# Install PyTorch into the given interpreter's environment before the project itself, so that
# the project's plain `torch>=2.4` requirement is already met and pip pulls nothing more.
#   - a machine with an NVIDIA driver gets the default (CUDA) build from PyPI;
#   - otherwise a CPU build: torch 2.13.0 from PyTorch's CPU wheel index where it is reachable
#     (about 200 MB instead of a multi-GB CUDA build), else from the default index (where the
#     development machines of this project keep a local CPU wheel of that version).
# It says which build it got. Override with TORCH_SPEC, e.g. TORCH_SPEC="torch==2.6.0" make test.
set -euo pipefail
python=${1:-python3}
CPU_INDEX=https://download.pytorch.org/whl/cpu
say_which() {
    "$python" -W ignore -c "import torch; cuda = torch.version.cuda; print(f'installed torch {torch.__version__}: ' + (f'a CUDA {cuda} build' if cuda else 'a CPU build') + ' ($1)')"
}
if "$python" -c "import torch" 2>/dev/null; then
    say_which "already installed"
    exit 0
fi
if [ -n "${TORCH_SPEC:-}" ]; then
    "$python" -m pip install --quiet "$TORCH_SPEC"
    say_which "TORCH_SPEC=$TORCH_SPEC"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    "$python" -m pip install --quiet "torch>=2.4"
    say_which "an NVIDIA driver is present: PyPI's default build"
else
    spec="torch==2.13.0"
    if "$python" -m pip install --quiet --retries 0 --timeout 20 --index-url "$CPU_INDEX" "$spec" 2>/dev/null; then
        say_which "no NVIDIA driver: $spec, from $CPU_INDEX or a local wheel"
    else
        "$python" -m pip install --quiet "$spec"
        say_which "no NVIDIA driver, $CPU_INDEX out of reach: $spec from the default index"
    fi
fi
