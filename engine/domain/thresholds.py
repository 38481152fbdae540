"""The threshold a rule's condition compares an amount with, read from the condition itself: a rule written
``args.amount > 500`` fires for 5,000 ten times over its threshold, and the queue ranks it above one just over it.

Only the plain forms are read (``args.x > N``, ``args.x >= N``, ``N < args.x``, ``args['x'] > N``, also inside an
``and``); any other condition has no threshold, and its approvals rank by tier and time left alone."""

from __future__ import annotations

from jinja2 import TemplateError, nodes
from jinja2.sandbox import SandboxedEnvironment

__all__ = ["threshold_of"]

_ENV = SandboxedEnvironment()


def threshold_of(expr: str) -> tuple[str, float] | None:
    """``(argument, threshold)`` of the first comparison of one argument above a positive number in ``expr``."""
    try:
        tree = _ENV.parse("{{ " + expr + " }}")
    except TemplateError:
        return None
    for compare in tree.find_all(nodes.Compare):
        if len(compare.ops) != 1:
            continue
        op = compare.ops[0]
        left, right = compare.expr, op.expr
        if op.op in ("gt", "gteq"):
            name, limit = _argument(left), _number(right)
        elif op.op in ("lt", "lteq"):
            name, limit = _argument(right), _number(left)
        else:
            continue
        if name is not None and limit is not None and limit > 0:
            return name, limit
    return None


def _argument(node: nodes.Node) -> str | None:
    """``x`` of ``args.x`` or ``args['x']``."""
    if isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name) and node.node.name == "args":
        return node.attr
    if (
        isinstance(node, nodes.Getitem)
        and isinstance(node.node, nodes.Name)
        and node.node.name == "args"
        and isinstance(node.arg, nodes.Const)
        and isinstance(node.arg.value, str)
    ):
        return node.arg.value
    return None


def _number(node: nodes.Node) -> float | None:
    if isinstance(node, nodes.Const) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    return None
