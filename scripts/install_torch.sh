#!/usr/bin/env bash
# Install PyTorch into the given interpreter's environment before the project itself, so that
# the project's plain `torch>=2.4` requirement is already met and pip pulls nothing more.
#   - a machine with an NVIDIA driver gets the default (CUDA) build from PyPI;
#   - otherwise torch 2.13.0, which CPU-only development machines of this project keep as a
#     local CPU wheel (installs in seconds instead of downloading a multi-GB CUDA build).
# Override with TORCH_SPEC, e.g. TORCH_SPEC="torch==2.6.0" make test.
set -euo pipefail
python=${1:-python3}
if "$python" -c "import torch" 2>/dev/null; then
    exit 0
fi
if [ -n "${TORCH_SPEC:-}" ]; then
    spec=$TORCH_SPEC
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    spec="torch>=2.4"
else
    spec="torch==2.13.0"
fi
echo "installing $spec"
"$python" -m pip install --quiet "$spec"
