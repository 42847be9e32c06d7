"""Intake: where every fire enters ``callbacks/``, before any session runs.

``intake.py`` accepts a callback (dedupe window, the durable response contract, the session key)
and hands it to the session queue; ``silences.py`` answers, on every fire, whether a silence or a
maintenance window mutes it, and makes and expires silences for the API.
"""
