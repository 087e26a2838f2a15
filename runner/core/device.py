"""Device choice, precision flags, and applying a map in micro-batches that shrink on OOM."""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator

if TYPE_CHECKING:
    import torch


def pick_device(requested: str = "auto") -> torch.device:
    """The torch device for a validated name (see :func:`device_unavailable`)."""
    import torch  # lazy: torch

    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {requested!r} requested but CUDA is not available")
    return device


def describe(device: torch.device) -> str:
    import torch  # lazy: torch

    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    n = torch.get_num_threads()
    return f"cpu ({n} thread{'s' * (n != 1)})"


def set_precision(precision: str) -> None:
    """fp32/fp64 use exact IEEE matmuls everywhere; tf32 lets CUDA matmuls, convolutions and cuDNN
    RNNs use TensorFloat-32. PyTorch's own default lets cuDNN use TF32 for convolutions and RNNs
    (LSTMs), so fp32 must say ieee explicitly."""
    import torch  # lazy: torch

    mode = "tf32" if precision == "tf32" else "ieee"
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch >= 2.9 API
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
        torch.backends.cudnn.rnn.fp32_precision = mode
    else:
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        torch.backends.cudnn.allow_tf32 = mode == "tf32"  # covers cuDNN convolutions and RNNs


def make_deterministic(device: torch.device) -> None:
    """Same inputs, same bits on CUDA too, so that a resumed run equals an uninterrupted one:
    cuBLAS with a fixed workspace (the variable is read when cuBLAS creates its handle, i.e. before
    the first matmul on the device), cuDNN's deterministic algorithms, and PyTorch's deterministic
    kernels where they exist (``warn_only``: an op without one warns instead of failing the run)."""
    if device.type != "cuda":
        return
    import torch  # lazy: torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)


_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
VALID_DEVICES = "auto, cpu, cuda, cuda:N"


def _valid_device(value: str) -> str:
    problem = device_problem(value)
    if problem:
        raise ValueError(problem)
    return value


#: A spec field naming a device: ``auto`` (CUDA when present, else CPU), ``cpu``, ``cuda``, ``cuda:1``...
DeviceName = Annotated[str, AfterValidator(_valid_device)]


def device_problem(requested: str) -> str | None:
    """Why ``requested`` is not a device name (syntax only; see :func:`device_unavailable`)."""
    if not _DEVICE.match(requested or ""):
        return f"unknown device {requested!r}; valid: {VALID_DEVICES}"
    return None


#: What a machine shows when it has a GPU driver torch could use (NVIDIA's, ROCm's, WSL's).
GPU_DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg")


def cuda_impossible() -> bool:
    """True where torch cannot see a CUDA device, known without importing torch: every device hidden
    (``CUDA_VISIBLE_DEVICES`` empty or -1), or a Linux machine with no GPU driver (none of
    :data:`GPU_DRIVER_FILES`). False: ask torch (``torch.cuda.is_available()``)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
        return True
    return sys.platform == "linux" and not any(os.path.exists(f) for f in GPU_DRIVER_FILES)


def device_unavailable(requested: str) -> str | None:
    """Why ``requested`` cannot be used on this machine, naming what can (None when it can)."""
    problem = device_problem(requested)
    if problem or requested in ("auto", "cpu"):  # auto falls back to the CPU: no need to ask torch
        return problem
    import torch  # lazy: torch

    here = "auto, cpu" + (", cuda" if torch.cuda.is_available() else "")
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            return f"device {requested!r}: CUDA is not available on this machine; valid here: {here}"
        index = int(requested.split(":")[1]) if ":" in requested else 0
        if index >= torch.cuda.device_count():
            return (f"device {requested!r}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                    f"(cuda:0 .. cuda:{torch.cuda.device_count() - 1})")
    if requested == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        return f"device 'mps' is not available on this machine; valid here: {here}"
    return None
