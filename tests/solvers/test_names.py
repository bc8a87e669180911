"""The solver and formulation names the parsers read equal what the pipelines accept."""

import pytest

from placement.models.cim_makespan.build import FORMULATIONS
from placement.solvers import names


@pytest.mark.unit
def test_formulation_names_are_the_models_formulations():
    assert names.FORMULATION_NAMES == tuple(FORMULATIONS)
