"""Soft sparsity chi(v) = ||v||_2 / ||v||_1 and its per-word statistics.

Thesis (Saphra), Ch. 6 ("Beyond Words: The Development of Feature Sparsity"):
chi is computed for activations h and gradients h-bar of each token, averaged
per word (target word x_t or input word x_{t-1}), and the per-word means are
correlated with word frequency (rho<- and rho->, Ch. 6 Fig. 3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyses._arrays import tensor

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = ["sparsity", "WordSparsityAccumulator", "pearson", "frequency_correlation"]


def sparsity(v: Tensor, dim: int = -1) -> Tensor:
    """Soft sparsity chi(v) = ||v||_2 / ||v||_1 along ``dim``.

    Thesis Ch. 6 Sec. 2 ("Measuring sparsity"; Repetti et al. 2015, Hoyer 2004):
    chi = 1 for a one-hot vector (its maximum), 1/sqrt(d) for a uniform vector
    of length d (its minimum); NaN for the zero vector (0/0).

    Parameters
    ----------
    v : Tensor, shape (..., d, ...)
        Activations or gradients; integer and half-precision input (float16, bfloat16, whose
        L1 norm overflows past 65504) are computed in float32.
    dim : int
        Axis holding the vector's components.

    Returns
    -------
    Tensor
        ``v``'s shape without ``dim``; float dtype of ``v`` (at least float32), same device.
    """
    import torch  # lazy: torch

    v = tensor(v, "v", min_ndim=1)
    if not -v.ndim <= dim < v.ndim:
        raise ValueError(f"dim {dim} is outside v's {v.ndim} dimensions (shape {tuple(v.shape)})")
    if not v.is_floating_point() or v.dtype in (torch.float16, torch.bfloat16):
        v = v.to(torch.float32)
    l2 = torch.linalg.vector_norm(v, ord=2, dim=dim)
    l1 = torch.linalg.vector_norm(v, ord=1, dim=dim)
    return l2 / l1


class WordSparsityAccumulator:
    """Streaming per-word mean of a per-token value (e.g. chi), on the device.

    mean_w = sum_{t: w_t = w} value_t / #{t: w_t = w}, i.e. mu_{t: x_t = w}(chi(h_t))
    of thesis Ch. 6 Sec. 3. Sums are float64, counts int64; updates use
    ``index_add_`` and never synchronise with the host. Non-finite values (chi of
    a zero vector is NaN) are skipped: they add to neither sum nor count.

    Parameters
    ----------
    vocab_size : int
        Number of word ids; ids must lie in [0, vocab_size).
    device : torch.device or str
        Where the running sums live.
    """

    def __init__(self, vocab_size: int, device: torch.device | str = "cpu") -> None:
        import torch  # lazy: torch

        self.vocab_size = int(vocab_size)
        self.device = torch.device(device)
        self._sums = torch.zeros(self.vocab_size, dtype=torch.float64, device=self.device)
        self._counts = torch.zeros(self.vocab_size, dtype=torch.int64, device=self.device)

    def update(self, word_ids: Tensor, values: Tensor) -> None:
        """Add tokens. ``word_ids``: LongTensor (n,); ``values``: Tensor (n,)."""
        import torch  # lazy: torch

        if word_ids.shape != values.shape or word_ids.ndim != 1:
            raise ValueError(
                f"need word_ids and values of equal shape (n,); got {tuple(word_ids.shape)}, {tuple(values.shape)}"
            )
        ids = word_ids.to(device=self.device, dtype=torch.int64)
        vals = values.to(device=self.device, dtype=torch.float64)
        ok = torch.isfinite(vals)
        self._sums.index_add_(0, ids, torch.where(ok, vals, torch.zeros_like(vals)))
        self._counts.index_add_(0, ids, ok.to(torch.int64))

    @property
    def counts(self) -> Tensor:
        """Tensor (vocab,), int64: finite values seen per word."""
        return self._counts

    @property
    def sums(self) -> Tensor:
        """Tensor (vocab,), float64: sum of finite values per word."""
        return self._sums

    def means(self) -> Tensor:
        """Tensor (vocab,), float64: per-word mean; NaN where the count is 0."""
        import torch  # lazy: torch

        return self._sums / self._counts.to(torch.float64)  # 0/0 -> NaN

    def state_dict(self) -> dict[str, Tensor]:
        return {"sums": self._sums.clone(), "counts": self._counts.clone()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        import torch  # lazy: torch

        sums, counts = state["sums"], state["counts"]
        if sums.shape != (self.vocab_size,) or counts.shape != (self.vocab_size,):
            raise ValueError(f"state for vocab {tuple(sums.shape)}, accumulator has {self.vocab_size}")
        self._sums = sums.to(device=self.device, dtype=torch.float64).clone()
        self._counts = counts.to(device=self.device, dtype=torch.int64).clone()


def pearson(x: Tensor, y: Tensor) -> Tensor:
    """Pearson correlation over pairs where both values are finite.

    r = sum (x - mean x)(y - mean y) / sqrt(sum (x - mean x)^2 sum (y - mean y)^2),
    two-pass in float64, without host synchronisation.

    Parameters
    ----------
    x, y : Tensor, shape (n,)

    Returns
    -------
    Tensor, shape ()
        float64; NaN with fewer than two valid pairs or zero variance.
    """
    import torch  # lazy: torch

    x, y = tensor(x, "x"), tensor(y, "y")
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"need two 1-D tensors of equal length; got {tuple(x.shape)}, {tuple(y.shape)}")
    x = x.to(torch.float64)
    y = y.to(device=x.device, dtype=torch.float64)
    ok = torch.isfinite(x) & torch.isfinite(y)
    w = ok.to(torch.float64)
    n = w.sum()
    x = torch.where(ok, x, torch.zeros_like(x))
    y = torch.where(ok, y, torch.zeros_like(y))
    dx = (x - (x * w).sum() / n) * w
    dy = (y - (y * w).sum() / n) * w
    r = (dx * dy).sum() / torch.sqrt(dx.square().sum() * dy.square().sum())
    return torch.where(n >= 2, r.clamp(-1.0, 1.0), torch.full_like(r, float("nan")))


def frequency_correlation(
    word_means: Tensor,
    word_counts: Tensor,
    *,
    min_count: int = 1,
    log: bool = False,
) -> Tensor:
    """Correlation of per-word mean sparsity with word frequency.

    rho(h) = corr_w( mu_{t: x_t = w}(chi(h_t)), freq(w) )   (thesis Ch. 6 Sec. 3,
    rho<- for target words, rho-> for input words; Fig. 3). Following the thesis,
    freq(w) is the raw frequency (a count or relative frequency gives the same
    rho); pass ``log=True`` for log frequency, which the thesis does not use.
    The thesis' freq(w) is the training-corpus frequency: pass those counts as
    ``word_counts`` if the means were collected on another corpus.

    Parameters
    ----------
    word_means : Tensor, shape (vocab,)
        Per-word mean sparsity, NaN for unseen words
        (:meth:`WordSparsityAccumulator.means`).
    word_counts : Tensor, shape (vocab,)
        Word frequencies.
    min_count : int
        Only words with ``word_counts >= min_count`` enter (the thesis restricts
        some plots to words above 1k or 100k occurrences).
    log : bool
        Correlate with log frequency instead.

    Returns
    -------
    Tensor, shape ()
        Pearson r (float64); NaN when undefined.
    """
    import torch  # lazy: torch

    word_means = tensor(word_means, "word_means", ndim=1)
    word_counts = tensor(word_counts, "word_counts", ndim=1, like=word_means)
    if word_means.shape != word_counts.shape:
        raise ValueError(f"word_means {tuple(word_means.shape)} and word_counts {tuple(word_counts.shape)} must "
                         "have one entry per word each")
    freq = word_counts.to(device=word_means.device, dtype=torch.float64)
    keep = freq >= min_count
    if log:
        keep = keep & (freq > 0)
        freq = torch.log(torch.where(keep, freq, torch.ones_like(freq)))
    nan = torch.full_like(freq, float("nan"))
    return pearson(torch.where(keep, word_means.to(torch.float64), nan), torch.where(keep, freq, nan))
