"""Training as time: the engine's kit for studies that train networks and measure their checkpoints.

A study supplies a :class:`~runner.checkpointed.loop.Trainable` (its model, data, loss and
optimizer step, its evaluation at each epoch end and its extra resume state); the kit runs it:

- :mod:`.loop`: the resumable training loop, its :class:`~.loop.Curves`, :class:`~.loop.Saved`
  and :class:`~.loop.Finished`;
- :mod:`.files`: the one checkpoint format (safetensors, flat string metadata, atomic writes);
- :mod:`.schedule`: at which optimizer steps checkpoints are kept;
- :mod:`.axes`: the training-time axes (``checkpoint``, ``step``, ``epoch``, ``train_step``,
  ``training_epoch``, ``layer``), ``checkpoint_path`` and the loss curves of the store;
- :mod:`.session`: which checkpoints exist, and a training run's results written to the store;
- :mod:`.activations`: the activation context of the measures, read through each family's adapter once
  for all the measures of a group;
- :mod:`.simple`: a study with checkpoints from a model, its loss and data only (:class:`~.simple.SimpleStudy`).
"""
