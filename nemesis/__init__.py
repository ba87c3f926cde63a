"""Fault injection: nemeses (setup / invoke / teardown + the ``f``s they handle), a seeded
scheduler that records every fault in the history, and scripted scenarios."""
