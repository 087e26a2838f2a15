"""Version numbers that outlive a run: the store's layout conventions (and the JSON a command
prints, whose keys are stable within one store format: ``docs/json.md``)."""

#: Version of the store's layout conventions, in the root attribute ``store_format``. A store of
#: an older format is refused with a message saying what to do (see :mod:`runner.storage.store`).
#: 3: completion records beside the store, the runner's own attributes under ``runner``, real units,
#: NaN for "never" and flags for outcomes.
STORE_FORMAT = 3
