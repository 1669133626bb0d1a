"""A consumer group's dead letters: the messages it will never handle, kept in ``pin.dlq.<group>.v1`` (or, when that
topic cannot carry one whole, with their full bytes in ``messaging.dead_letter``); see docs/design/consumers.md,
"Dead letters".

``send`` is how the runtime keeps one, ``store`` the rows of ``messaging.dead_letter``, ``command`` what `pin dlq
list|replay` does with them. The outbox's dead letters (rows the relay could not publish) are another thing:
:mod:`pin.outbox.dead_letters`.
"""
