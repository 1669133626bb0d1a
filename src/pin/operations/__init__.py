"""What operators do to the running system, recorded: the audit trail of operator actions (``audit.py``)."""
