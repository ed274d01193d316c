"""Troupe's vocabulary and agent loop, free of Ray: tools, chunks, run state, models, policies, errors."""
