"""The data layer every study uses: data sources as plugins, like model families.

- :mod:`~runner.data.registry`: :class:`~runner.data.registry.DataSource`, the forms data come
  in, and the registry a study asks (:func:`~runner.data.registry.data_source`);
- :mod:`~runner.data.forms`: the records of each form;
- the built-in sources: :mod:`~runner.data.hub` (``hf:``), :mod:`~runner.data.files` (local
  files), :mod:`~runner.data.pydoc_text` (``builtin:pydoc-topics``); a study registers its own
  generated ones (scaffold corpora, ListOps, the tiny tagged corpus);
- :mod:`~runner.data.text`: sentence splitting and record fields.
"""

from runner.data import files, hub, pydoc_text  # noqa: F401 - each registers its source
