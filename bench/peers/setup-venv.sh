#!/usr/bin/env bash
# Creates the Python venv that runs the PyTorch peer scripts (torch_train.py, check_safetensors.py).
# Idempotent: if torch, numpy, safetensors, onnx, onnxruntime and onnxscript already import there,
# nothing is installed. PyPI's torch
# wheel is used because it is the strongest PyTorch we can install (Debian's python3-torch 1.13 is older
# and slower), so the comparison is against what PyTorch users actually run.
# Usage: bench/peers/setup-venv.sh [VENV_DIR]   (default ${LATHE_PEERS_VENV:-$HOME/.cache/lathe/peers-venv})
# The last line printed is the venv's python path.
set -euo pipefail

venv="${1:-${LATHE_PEERS_VENV:-$HOME/.cache/lathe/peers-venv}}"
py="$venv/bin/python"

if [ ! -x "$py" ]; then
  echo "setup-venv: creating $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
fi

if "$py" -c "import torch, numpy, safetensors, onnx, onnxruntime, onnxscript" 2>/dev/null; then
  echo "setup-venv: torch $("$py" -c 'import torch; print(torch.__version__)') already installed" >&2
else
  echo "setup-venv: installing torch numpy safetensors onnx onnxruntime onnxscript from PyPI into $venv" >&2
  "$py" -m pip install --quiet --upgrade pip >&2
  # onnx / onnxruntime check Lathe's ONNX exports (onnx_check.py); onnxscript is torch.onnx.export's
  # exporter (torch_resnet_onnx.py).
  "$py" -m pip install --quiet torch numpy safetensors onnx onnxruntime onnxscript >&2
fi

echo "$py"
