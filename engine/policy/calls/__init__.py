"""The ``model_calls:`` section: how a failed model call is classified, retried at the
transport, and what its usage costs (model in ``model.py``, runtime in ``runtime.py``,
reading replies in ``replies.py``)."""
