"""The kit's sessions in a distributed executor's workers (:class:`CheckpointedWorkers`), without torch."""

from __future__ import annotations

from typing import Any

from runner.plugin.study import Prepared, Session, WorkerSessions


class CheckpointedWorkers(WorkerSessions):
    """A checkpointed study's worker session (:class:`runner.plugin.study.WorkerSessions`): its own
    session, attached to the driver's store (:meth:`runner.checkpointed.session.CheckpointedSession.attach`),
    so that it measures there and looks for the checkpoints other workers saved since."""

    def open_worker(self, p: Prepared, device: Any, store: Any) -> Session:
        session = self.open(p, device, lambda _message: None)
        session.attach(store, worker=True)
        return session
