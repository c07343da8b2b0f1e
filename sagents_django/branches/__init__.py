"""Branches of a conversation's transcript: the model (the verbs are
``runtime.branches``, the reads ``services.branches``)."""
