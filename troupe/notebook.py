"""Approve and decline paused tool calls from a notebook, with buttons (needs ``ipywidgets``).

    from troupe.notebook import approval_buttons

Defined in ``troupe.ops.notebook``; this is the name users import.
"""

from troupe.ops.notebook import ApprovalPanel, ApprovalRow, Decider, approval_buttons

__all__ = ["ApprovalPanel", "ApprovalRow", "Decider", "approval_buttons"]
