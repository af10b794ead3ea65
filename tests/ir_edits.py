"""Hand edits of compiled IR for the tests' negative controls: change one value and
check that the interpreter or a check catches what it breaks."""

from xdsl.dialects.builtin import IntegerAttr, i64


def _signed(value: int) -> int:
    """A 64-bit pattern as the i64 constant holds it (a swizzle mode sets bit 63)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def set_i64_constant(module, old: int, new: int) -> int:
    """Change every i64 constant `old` (arith's or llvm's) to `new`; how many."""
    old, new = _signed(old), _signed(new)
    found = 0
    for op in module.walk():
        value = getattr(op, "value", None)
        if (
            isinstance(value, IntegerAttr)
            and value.type == i64
            and value.value.data == old
        ):
            where = op.properties if "value" in op.properties else op.attributes
            where["value"] = IntegerAttr(new, i64)
            found += 1
    return found
