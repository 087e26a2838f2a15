"""Published checkpoint suites as training time: the series of each ``kind = "suite"`` network, what
loading them will download, and the word activations the checkpoint measures read.

A suite network is not trained: its checkpoints are the revisions of a hub repository (Pythia's
``step1000`` ...) or the step folders of a local directory (:mod:`models.suites`), and they form the
same ``checkpoint`` / ``step`` axis as a trained network's. Planning reads configurations only
(``config.json``: the layers a measure names must exist) and the hub's file sizes; weights are
fetched, into the ``huggingface_hub`` cache, by the first task that loads a checkpoint.

The analysis text is the ``[corpus]``'s analysis words. A checkpoint reads them in windows of
``window_words`` words joined by spaces, with its own tokenizer; a word's activation pools its subword
tokens (``pool``: mean by default), so activations, tags and word frequencies stay aligned word by word
and every checkpoint measure applies unchanged.
"""

from __future__ import annotations

from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from models.hub import ModelLoadError, hub_off
from models.source import Source
from models.suites import (
    Checkpoint,
    Fetch,
    adapter_for,
    fetch_plan,
    hub_series,
    layer_names,
    lm_loss,
    load_checkpoint,
    load_config,
    load_tokenizer,
    local_series,
    local_tokenizer_problem,
    next_token_loss,
    pool_words,
    word_batches,
)
from models.registry import SUITES
from runner.studies.training.data.corpus import Corpus
from runner.data.files import anchor
from runner.core.layout import Layout
from runner.plugin.measures import measures
from runner.core.requirements import Requirement
from runner.spec.specfile import SpecError, SpecFile
from runner.storage.store import Store
from runner.studies.training.context import Context
from runner.studies.training.spec import NetworkSpec, TrainingStudySpec

if TYPE_CHECKING:
    import torch
    from torch import Tensor
    from runner.checkpointed.activations import ActivationCache, Reading

def _series_name(source: str, location: str) -> str:
    """How a series' missing checkpoints are grouped: by its source where that names one repository or
    folder per revision (``google/multiberts-seed_0-step_{revision}``), else by the location they share."""
    return source if "{revision}" in source else location


#: What to do about a hub checkpoint that cannot be had here.
HUB_FIX = ("on a machine with network, `runner apply` (or `hf download REPO --revision REV`) fills the cache "
           "(HF_HOME); or give a local directory of checkpoints")


@dataclass
class Suites:
    """The resolved series of every network of a suite spec."""

    series: list[list[Checkpoint]]
    """Per network, its checkpoints in step order (every network has the same steps)."""
    layers: list[str] | None
    """``embedding``, ``layer1`` .. ``layerN``: the union over networks (the store's ``layer``); None while
    the configurations cannot be read."""
    fetch: list[Fetch]

    @property
    def steps(self) -> list[int]:
        return [c.step for c in self.series[0]]

    def identity(self, network: int, checkpoint: int, net: NetworkSpec) -> dict:
        """What a task id hashes for one checkpoint it reads."""
        c = self.series[network][checkpoint]
        return {"source": c.source, "revision": c.revision, **{k: v for k, v in net.key().items()
                                                                  if k not in ("source", "revisions", "kind")}}

    def download_lines(self) -> list[str]:
        todo = [f for f in self.fetch if not f.cached and f.missing is None]
        here = sum(f.cached for f in self.fetch)
        known = [f.bytes for f in todo if f.bytes is not None]
        size = f"{sum(known) / 1e9:.2f} GB" + (f" (+{len(todo) - len(known)} of unknown size)"
                                              if len(known) < len(todo) else "")
        lacking = sum(f.missing is not None for f in self.fetch)
        return [f"downloads  {len(todo)} checkpoint(s) to fetch, {size}; {here} local or cached"
                + (f"; {lacking} neither here nor to be had now (see the requirements)" if lacking else "")]


def _source(net: NetworkSpec, base: Path) -> tuple[str, bool]:
    """(where the series is, whether it is a local directory)."""
    src = Source(net.source or "")  # a plain name is a hub id here, a path only when it looks like one
    path = Path(anchor(src.rest, base)).expanduser()
    if src.explicit_path or src.rest.startswith(("/", ".", "~")) or path.is_dir():
        return str(path), True
    return src, False


def resolve(spec: TrainingStudySpec, sf: SpecFile) -> tuple[Suites | None, list[str]]:
    """The series, their layers and downloads; spec mistakes raise :class:`SpecError`, what this machine
    lacks (an uncached revision with the hub off, a missing revision or folder) comes back as unmet."""
    base = sf.path.parent
    problems: list[str] = []
    unmet: list[str] = []
    series: list[list[Checkpoint]] = []
    for n, net in enumerate(spec.model):
        where = ("model", spec.entry(n))
        src, local = _source(net, base)
        if local and "{revision}" in src:
            problems.append(sf.problem(where + ("source",), "{revision} names one hub repository per checkpoint; a "
                                       "local series is one folder per revision"))
            continue
        if local and not Path(src).is_dir():
            problems.append(sf.problem(where + ("source",), f"no such checkpoint directory {src}"))
            continue
        if not local and net.revisions is None:
            problems.append(sf.problem(where + ("revisions",), f"a hub series ({src}) needs revisions, e.g. "
                                       "\"step{0..143000:1000}\" or a list"))
            continue
        try:
            series.append(local_series(src, net.revisions) if local else hub_series(src, net.revisions))
        except ModelLoadError as err:
            unmet.append(Requirement.from_error(f"[[model]] {net.name}", err, kind="model", name=net.source))
    if problems:
        raise SpecError(sf.path, problems)
    if unmet:
        return None, unmet
    for n, s in enumerate(series[1:], 1):
        if [c.step for c in s] != [c.step for c in series[0]]:
            raise SpecError(sf.path, [sf.problem(("model", spec.entry(n), "revisions"), f"the steps of "
                                                 f"{spec.model[n].name} differ from those of {spec.model[0].name}; "
                                                 "every suite of a spec shares one checkpoint axis")])
    online = not any(not c.local for s in series for c in s) or not hub_off()
    with ThreadPoolExecutor(8) as pool:  # one hub request per checkpoint not yet cached
        fetch = list(pool.map(lambda job: fetch_plan(job[1], online, job[0].pickled_weights),
                              [(net, c) for net, s in zip(spec.model, series) for c in s]))
    nets = [net for net, s in zip(spec.model, series) for _ in s]
    missing = [Requirement(f"[[model]] {net.name} {f.checkpoint.location} revision {f.checkpoint.revision}",
                           f.reason or f.missing, kind="checkpoint", name=str(f.checkpoint.revision),
                           scope=f"[[model]] {net.name} {_series_name(net.source, f.checkpoint.location)}",
                           fix=None if f.checkpoint.local else HUB_FIX)
               for net, f in zip(nets, fetch, strict=True) if f.missing]
    missing += [Requirement(f"[[model]] {net.name} {s[-1].location}", problem, kind="tokenizer", name=s[-1].location)
                for net, s in zip(spec.model, series) if s[-1].local  # the tokenizer the tasks load
                for problem in [local_tokenizer_problem(Path(s[-1].location))] if problem]
    unmet += missing
    suites = Suites(series, None, fetch)
    if missing:
        return suites, unmet
    layers: list[list[str]] = []
    heads: list[str] = []
    for n, (net, s) in enumerate(zip(spec.model, series)):
        try:
            config = load_config(s[-1], trust_remote_code=net.trust_remote_code)
        except ModelLoadError as err:
            unmet.append(Requirement.from_error(f"[[model]] {net.name}", err, kind="model", name=net.source))
            continue
        try:
            layers.append(layer_names(config))
            heads.append(adapter_for(config).head)
        except ModelLoadError as err:
            raise SpecError(sf.path, [sf.problem(("model", spec.entry(n), "source"), str(err))]) from None
    if unmet:
        return suites, unmet
    registry = measures("training")
    names = [x.name for x in spec.model]
    for i, m in enumerate(spec.measure):
        masked = [n for n in spec.measured(m) if heads[names.index(n)] != "causal"]
        if (s := registry[m.kind].tags.checkpoint.suites) and s.causal and masked:
            raise SpecError(sf.path, [sf.problem(("measure", i, "kind"), f"{m.kind} reads the gradients of the "
                                                 f"next-token loss; {masked} are masked language models")])
    for i, m in enumerate(spec.measure):
        tags = registry[m.kind].tags
        for name in spec.measured(m) + tags.named(m, "references"):
            have = layers[[x.name for x in spec.model].index(name)]
            bad = [x for x in tags.named(m, "layers") if x not in have]
            if bad:
                raise SpecError(sf.path, [sf.problem(("measure", i, "layers"), f"{name} has no layer {bad}; its "
                                                     f"layers are {have[0]}, {have[1]} .. {have[-1]}")])
    suites.layers = max(layers, key=len)
    return suites, unmet


class SuiteContext(Context):
    """What measure tasks of a suite share: the analysis words and tags, checkpoints loaded when first read."""

    def __init__(self, study: TrainingStudySpec, suites: Suites, corpus: Corpus, layout: Layout, store: Store,
                 device: torch.device, cache: ActivationCache):
        self.study, self.corpus, self.layout, self.store, self.device = study, corpus, layout, store, device
        self.suites, self.cache = suites, cache
        self.names = [m.name for m in study.model]
        self.last = len(suites.steps) - 1
        self.seed = study.experiment.seed
        words, tags = corpus.analysis_streams(study.corpus.analysis_split)
        n = min(study.corpus.analysis_tokens, words.numel() - 1)
        self.text = [corpus.vocab.itos[int(i)] for i in words[:n]]
        self.word_ids = words[:n].to(device)
        self.tags = {t: s[:n + 1].to(device) for t, s in tags.items()}
        self._cache: OrderedDict = OrderedDict()
        self._tokenizers: dict[int, object] = {}
        registry = measures("training")
        self.head = any((s := registry[m.kind].tags.checkpoint.suites) and s.head for m in study.measure)
        """Load checkpoints with their language-modelling heads (a measure reads losses or gradients)."""

    def model(self, network: int, checkpoint: int):
        key = ("model", network, checkpoint)
        if key not in self._cache:
            net = self.study.model[network]
            self._put(key, load_checkpoint(self.suites.series[network][checkpoint], device=self.device,
                                           trust_remote_code=net.trust_remote_code,
                                           pickled_weights=net.pickled_weights, head=self.head))
        return self._cache[key]

    def tokenizer(self, network: int):
        if network not in self._tokenizers:
            net = self.study.model[network]
            self._tokenizers[network] = load_tokenizer(self.suites.series[network][-1],
                                                       trust_remote_code=net.trust_remote_code)
        return self._tokenizers[network]

    def reading(self, network: int, checkpoint: int, gradients: bool = False) -> Reading:
        """A checkpoint read through the suite family's adapter: the analysis words in windows, each word's
        subword tokens pooled (``pool``), each window with its next-token loss (``gradients``)."""
        from runner.checkpointed.activations import Reading  # lazy: torch

        net, model = self.study.model[network], self.model(network, checkpoint)
        batches = word_batches(model, self.tokenizer(network), self.text, window=net.window_words,
                               batch_size=net.batch_size)
        owners = [owner for _, owner in batches]
        losses = tuple(next_token_loss(model, inputs, owner) for inputs, owner in batches) if gradients else ()
        return Reading(SUITES, model, tuple(inputs for inputs, _ in batches), losses=losses,
                       rows=lambda captures: pool_words(captures, owners, len(self.text), net.pool))

    def sentence_activations(self, network: int, checkpoint: int) -> dict[str, Tensor]:
        """The analysis sentence's word activations: the first words of :meth:`activations`, ``(seq, dim)``."""
        k = len(self.sentence_ids)
        return {name: a[:k] for name, a in self.activations(network, checkpoint).items()}

    def word_states(self, network: int, checkpoint: int) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """Every layer's word activations and the gradients of the next-token loss with respect to them."""
        return self.cache.gradient_rows(network, checkpoint)

    def lm_loss(self, network: int, checkpoint: int, mask_fraction: float) -> tuple[float, int]:
        net = self.study.model[network]
        return lm_loss(self.model(network, checkpoint), self.tokenizer(network), self.text, window=net.window_words,
                       batch_size=net.batch_size, mask_fraction=mask_fraction, seed=self.seed)

    def tag_labels(self, tagset: str) -> tuple[Tensor, Tensor]:
        t = self.tags[tagset]
        return t[:-1], t[1:]
