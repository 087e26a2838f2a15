"""Time `analyses.cca.svcca` against a straightforward NumPy SVCCA.

Usage: python benchmarks/svcca.py [--n 200000] [--d 200] [--device cpu|cuda]

Both run on the same 200,000 x 200 float32 activations (two views sharing a
50-dimensional signal). The NumPy reference does what Raghu et al.'s notebook
does: full thin SVD of each centred (n x d) view (numpy.linalg.svd,
full_matrices=False), keep 99% of variance, then CCA from covariance matrices
and their inverse square roots. The torch version does one thin QR per view
and only (d x d) work after that.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from analyses.cca import svcca


def numpy_svcca(x: np.ndarray, y: np.ndarray, keep: float = 0.99) -> tuple[float, np.ndarray, int, int]:
    def reduce(a: np.ndarray) -> np.ndarray:
        a = a.astype(np.float64)
        a = a - a.mean(axis=0)
        u, s, _ = np.linalg.svd(a, full_matrices=False)
        frac = np.cumsum(s**2) / np.sum(s**2)
        k = int(np.searchsorted(frac, keep - 1e-12)) + 1
        return u[:, :k] * s[:k]

    def inv_sqrt(c: np.ndarray) -> np.ndarray:
        w, v = np.linalg.eigh(c)
        return (v / np.sqrt(w)) @ v.T

    xr, yr = reduce(x), reduce(y)
    sxx, syy, sxy = xr.T @ xr, yr.T @ yr, xr.T @ yr
    rho = np.linalg.svd(inv_sqrt(sxx) @ sxy @ inv_sqrt(syy), compute_uv=False)
    rho = np.clip(rho[: min(xr.shape[1], yr.shape[1])], 0.0, 1.0)
    return float(rho.mean()), rho, xr.shape[1], yr.shape[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--d", type=int, default=200)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    n, d = args.n, args.d

    g = torch.Generator().manual_seed(0)
    z = torch.randn(n, 50, generator=g)
    x = z @ torch.randn(50, d, generator=g) + 0.3 * torch.randn(n, d, generator=g)
    y = z @ torch.randn(50, d, generator=g) + 0.3 * torch.randn(n, d, generator=g)

    device = torch.device(args.device)
    xt, yt = x.to(device), y.to(device)
    svcca(xt[:1000], yt[:1000])  # warm-up: lazy library initialisation
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    ours = svcca(xt, yt)
    sync()
    t_torch = time.perf_counter() - t0

    xn, yn = x.numpy(), y.numpy()
    t0 = time.perf_counter()
    ref_mean, ref_rho, ref_kx, ref_ky = numpy_svcca(xn, yn)
    t_numpy = time.perf_counter() - t0

    rho = ours.correlations.cpu().numpy()
    print(f"data: {n} x {d} float32, torch threads {torch.get_num_threads()}, device {device}")
    print(f"torch svcca : {t_torch:8.3f} s  mean {ours.mean.item():.10f}  dims ({ours.x_dims}, {ours.y_dims})")
    print(f"numpy svcca : {t_numpy:8.3f} s  mean {ref_mean:.10f}  dims ({ref_kx}, {ref_ky})")
    print(f"speed-up    : {t_numpy / t_torch:8.2f} x")
    same_dims = (ours.x_dims, ours.y_dims) == (ref_kx, ref_ky)
    print(f"agreement   : |mean diff| {abs(ours.mean.item() - ref_mean):.2e}", end="")
    if same_dims:
        print(f", max |rho diff| {np.abs(rho - ref_rho).max():.2e}")
    else:
        print(", kept dims differ")


if __name__ == "__main__":
    main()
