"""Figures of placements and sweeps, built from plain data with matplotlib's object-oriented
API (no pyplot, no global state: figures can be built in threads and in tests and inspected
as objects). A figure the data cannot support raises
:class:`~placement.plots.common.PlotDataError` naming what is missing.

* :mod:`placement.plots.common` -- what every figure shares: PlotDataError, numbers from
  sweep rows, column checks, figure and axis helpers, ``check_figure_path``/``save_figure``.
* :mod:`placement.plots.cim` -- the CIM paper's sweep figures: speed-up vs crossbars
  (Fig. 3), speed-up per network (Fig. 4), busy time per device (Fig. 5).
* :mod:`placement.plots.pim` -- Torch-PIM's figures: speed-up vs PIM cores (Fig. 3) and
  offloaded loop nests per operator vs problem size (Table 4).
* :mod:`placement.plots.gantt` -- Gantt charts of one placement: ``cim_gantt``, ``pim_gantt``.
"""
