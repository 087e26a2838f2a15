"""The one data layer every study uses.

- :mod:`~runner.data.sources`: where text comes from (hub, local files, the builtin English text,
  CoNLL-U treebanks), and the lookup of relative paths;
- :mod:`~runner.data.sentences`: sentences and fixed-length token samples (depth inputs);
- :mod:`~runner.data.tokens`: the thesis' preprocessing, vocabulary, splits and batching;
- :mod:`~runner.data.tagsets`: spaCy, topic and shuffled tags, open/closed word classes;
- :mod:`~runner.data.corpus`: a training study's corpus, from a ``[corpus]`` table;
- :mod:`~runner.data.listops`: seeded ListOps sequences and labels, by the Long Range Arena's rules.
"""
