"""Model families: ``config.model`` → the :class:`Task` that trains and evaluates it.

``"lstm"`` (:class:`SequenceTask`): LSTM and Bi-LSTM on SST-2 and IMDB; ``"tree_lstm"``
(:class:`TreeTask`): Tree-LSTM on the SST trees. See :mod:`arc_jax.train.tasks.base`.
"""

from arc_jax.train.tasks.base import Task
from arc_jax.train.tasks.sequence import SequenceTask, make_predict_fn
from arc_jax.train.tasks.tree import IndexedTrees, TreeTask

TASKS: dict[str, Task] = {task.name: task for task in (SequenceTask(), TreeTask())}
"""``config.model`` → its task."""
