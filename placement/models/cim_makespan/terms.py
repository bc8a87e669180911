"""Fast construction of the CIM model's rows, as the very expressions Pyomo's operators build.

Indexing a Pyomo component (``m.host[v]``) costs about a microsecond, several per row. The
families therefore look their variables and data up once, as plain dicts
(:func:`lookup`), and state each row with ordinary Pyomo operators on those: the same
operands, so the same expression trees as indexing the components would give
(``tests/models/test_model_identity.py`` compares them node by node, and the LP files).
Long sums are built in one step (:func:`weighted_sum`), as the tree Pyomo's ``sum`` ends in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyomo.common.numeric_types import native_numeric_types
from pyomo.core.base.var import VarData
from pyomo.core.expr.numeric_expr import LinearExpression


def lookup(component: Any) -> dict[Any, Any]:
    """Index -> variable (a Var) or value (an immutable Param), read once."""
    return dict(component.items())


def weighted_sum(terms: Iterable[tuple[float, VarData]]) -> Any:
    """``sum((x * c for c, x in terms), start=0.0)`` with the additions done in one step.

    Each product is Pyomo's own (with its simplifications: ``x * 1`` is ``x``, and
    ``x * 0`` vanishes if its zero optimization is on). Pyomo's additions of such terms
    drop a zero and give: none, 0.0; one, that term; more, one LinearExpression of them
    in order, which is what this builds, without the intermediate sums.
    """
    args: list[Any] = []
    for coef, var in terms:
        term = var * coef
        if term.__class__ in native_numeric_types:
            continue  # 0, the only number a variable times a number can simplify to
        args.append(term)
    if not args:
        return 0.0
    if len(args) == 1:
        return args[0]
    return LinearExpression(args)
