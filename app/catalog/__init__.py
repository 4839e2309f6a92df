"""Shared model data: the published model shapes (:mod:`.models`) and the GPUs (:mod:`.gpus`).

Plain data and the arithmetic that follows from it (a shape's parameter count), read by the
parameter models (app/params.py, app/param_groups.py) and by every simulation; it imports
nothing else of the app, so both layers can lean on it without an arrow running back up.
"""
