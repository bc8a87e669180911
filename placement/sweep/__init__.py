"""Design-space sweeps (``placement sweep``); the user-facing description is in :mod:`.run`.

Layers, each importing only those before it: :mod:`.targets` (one adapter per target:
everything that differs between CIM and PIM), :mod:`.grid` (what to sweep),
:mod:`.plan` (the points, and solving one), :mod:`.executors` (where points are solved),
:mod:`.store` (the sweep directory) and :mod:`.run` (the sweep itself). :mod:`.report`
renders a finished sweep directory.
"""
