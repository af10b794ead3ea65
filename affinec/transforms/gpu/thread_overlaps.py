"""Whether two accesses of a block's shared memory overlap, thread by thread.

The shared-memory hazard check (`shared_memory_hazards`) summarizes each access it
meets as an `Access`: the region of its buffer it may touch (per dimension the
indices, an interval, or `*`) and, enumerated only when asked, its points. Two
accesses with no barrier between (one of them a write) race unless their regions
are disjoint or no element is touched by two threads. For the latter this module
enumerates each access's points (`index_points`: who runs it and the variables of
the loops around it, under the guards around it), keys every point by the thread
that runs it, and looks for an element reached under two keys (for an asynchronous
copy, reached twice under any: its second landing would overwrite a copy in flight).

Who runs an access, and its key:

- a thread band's iteration is its thread, keyed by the thread's linear id as the
  interpreter numbers them;
- code of a `gpu.launch` or a kernel runs on every thread of the block, the thread
  ids its variables; the block's size comes from the launch, the kernel's
  `known_block_size`, the largest `gpu.launch_func` of it, or the ids' bounds;
- code of a grid band outside its bands runs on every thread of a band mapped to
  threads, and on the block as one program (key -1) before any is;
- an iteration of a block-mapped band has a key below -1 of its own (the band's
  number in the high bits). The interpreter runs such a band on one thread and its
  iterations are independent by the band's contract, so two accesses of one visit
  of it never race, even where their points cannot be enumerated.

Where the points cannot be told (no block size, more than `MAX_POINTS` of them,
indices it cannot follow) the overlap counts as a race, reported without an element.
A buffer in the program's overlays may share its bytes with any other shared
buffer, so its accesses overlap all of theirs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineMap

from affinec.dialects import affine, gpu
from affinec.dialects.affinec import BLOCK, GRID, THREAD, mapping_of
from affinec.ir.affine_exprs import Interval
from affinec.ir.index_sets import Axis, Guard, free_roots, index_points
from affinec.ir.ranges import value_range

MAX_POINTS = 1 << 16
"""Points of one access (its thread, its leaf's loops) enumerated at most to tell
which thread touches which element; past this two overlapping accesses count as a
race (a copy of a 128 x 64 tile by 256 threads: 8,192)."""

Points = tuple[np.ndarray, np.ndarray]
"""Which element (a row of indices) which thread (its key, `Who`) touches, one
entry per point of an access."""


class LazyPoints:
    """An access's points, enumerated when first asked (most accesses never are)."""

    __slots__ = ("compute", "key", "value")

    def __init__(self, compute: Callable[[], Points | None]) -> None:
        self.compute: Callable[[], Points | None] | None = compute
        self.value: Points | None = None
        self.key: tuple | None = None

    def get(self) -> Points | None:
        if self.compute is not None:
            self.value, self.compute = self.compute(), None
        return self.value

    def content(self) -> tuple:
        """The points as a key: equal where they are (elements and threads)."""
        if self.key is None:
            value = self.get()
            self.key = (
                ()
                if value is None
                else (value[0].shape, value[0].tobytes(), value[1].tobytes())
            )
        return self.key


Span = frozenset[int] | Interval | None
"""The indices of one dimension an access may touch: the values it takes (where they
could be enumerated), an interval, or None where nothing bounds them."""

Region = tuple[Span, ...]


@dataclass(frozen=True, eq=False)
class Access:
    """What `op` touches of a shared `buffer` at one visit: the region, and (where
    the check can tell) which thread touches which element."""

    op: Operation
    buffer: SSAValue
    region: Region
    band: tuple[int, Operation] | None
    """The visit of a leaf and the block-mapped band the access lies in, if any: two
    accesses of one band's visit are iterations of it, independent by its contract."""
    points: LazyPoints | None = None
    """Which thread touches which element, where the check can tell."""

    def overlaps(self, other: Access, overlays: set[SSAValue]) -> bool:
        if self.buffer is not other.buffer:
            return self.buffer in overlays or other.buffer in overlays
        return all(_meet(a, b) for a, b in zip(self.region, other.region, strict=True))

    def describe(self) -> str:
        name = self.buffer.name_hint or "<shared>"
        return f"%{name}[{', '.join(_span_text(i) for i in self.region)}]"


@dataclass(frozen=True)
class Who:
    """Who runs an access at one of its points: the key
    `base + sign * sum(stride * (value - lo))` over the axes (each the values naming
    one variable, its interval, its stride). Threads have keys from 0 (their linear
    id); an iteration of a block-mapped band one below -1 (the band's number in its
    high bits); the block of a band not yet mapped to threads, -1."""

    axes: tuple[tuple[tuple[SSAValue, ...], Interval, int], ...] = ()
    base: int = 0
    sign: int = 1


_BLOCK_PROGRAM = -1
_BAND_BITS = 32


class BlockThreads:
    """The threads of a block program and how the interpreter numbers them."""

    def __init__(self, program: Operation) -> None:
        self.program = program
        self.dims: tuple[int, int, int] | None = None
        """The block's threads along x, y, z (None: unknown, or not yet mapped)."""
        self.ids: tuple[tuple[SSAValue, ...], ...] = ((), (), ())
        """The values that are the thread id along x, y, z."""
        self.mapped = False
        """A grid band with thread bands: the interpreter runs it as a launch."""
        if isinstance(program, affine.ParallelOp):
            sizes = {
                e
                for band in program.walk()
                if isinstance(band, affine.ParallelOp) and mapping_of(band) == THREAD
                for e in [_thread_band_size(band)]
            }
            self.mapped = bool(sizes)
            if len(sizes) == 1 and None not in sizes:
                self.dims = (sizes.pop(), 1, 1)  # pyright: ignore[reportAttributeAccessIssue]
            return
        ids: list[list[SSAValue]] = [[], [], []]
        extents: list[int | None] = [None, None, None]
        if isinstance(program, gpu.LaunchOp):
            args = program.body.blocks[0].args
            for k in range(3):
                ids[k].append(args[3 + k])
                r = value_range(program.block_sizes[k], {})
                extents[k] = None if r is None else r[1]
        else:
            assert isinstance(program, gpu.FuncOp)
            known = program.block_size or _launched_block(program)
            if known is not None:
                extents = list(known)
        for op in program.walk():
            if isinstance(op, gpu.ThreadIdOp):
                k = "xyz".index(op.dim)
                ids[k].append(op.result)
                if extents[k] is None and isinstance(program, gpu.FuncOp):
                    extents[k] = op.bound  # pyright: ignore[reportAttributeAccessIssue]
        self.ids = tuple(tuple(i) for i in ids)
        if all(isinstance(e, int) and e > 0 for e in extents):
            self.dims = tuple(extents)  # pyright: ignore[reportAttributeAccessIssue]

    def name(self, key: int) -> str:
        """Who a key says ran an access."""
        if key == _BLOCK_PROGRAM:
            return "the block"
        if key < 0:
            return f"iteration {(-2 - key) % (1 << _BAND_BITS)} of a block-mapped band"
        if self.dims is None:
            return f"thread {key}"
        bx, by, _ = self.dims
        return f"thread ({key % bx}, {key // bx % by}, {key // (bx * by)})"


def _launched_block(kernel: gpu.FuncOp) -> tuple[int, int, int] | None:
    """The most threads along x, y, z that the module's `gpu.launch_func`s of
    `kernel` launch it with (None where none does, or some size is unknown)."""
    module = kernel.parent_op()
    top = kernel
    while top.parent_op() is not None:
        top = top.parent_op()  # pyright: ignore[reportAssignmentType]
    name = kernel.properties.get("sym_name") or kernel.attributes.get("sym_name")
    module_name = None
    if module is not None:
        module_name = module.properties.get("sym_name") or module.attributes.get(
            "sym_name"
        )
    if name is None or module_name is None:
        return None
    sizes: list[int] | None = None
    for launch in top.walk():
        if not isinstance(launch, gpu.LaunchFuncOp):
            continue
        if (launch.module_name, launch.kernel_name) != (
            module_name.data,  # pyright: ignore[reportAttributeAccessIssue]
            name.data,  # pyright: ignore[reportAttributeAccessIssue]
        ):
            continue
        found = [
            value_range(v, {})
            for v in (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ)
        ]
        if any(r is None for r in found):
            return None
        ends = [r[1] for r in found]  # pyright: ignore[reportOptionalSubscript]
        sizes = (
            ends
            if sizes is None
            else [max(a, b) for a, b in zip(sizes, ends, strict=True)]
        )
    return None if sizes is None else tuple(sizes)  # pyright: ignore[reportReturnType]


def _thread_band_size(band: affine.ParallelOp) -> int | None:
    """The threads a thread band's iterations number (its bounds constant)."""
    extents = _band_extents(band)
    return None if extents is None else math.prod(extents)


def _band_extents(band: affine.ParallelOp) -> list[int] | None:
    """A band's extents where its bounds are constants from 0, step 1 (the
    interpreter's thread bands)."""
    lower, upper = band.lowerBoundsMap.data, band.upperBoundsMap.data
    n = len(band.induction_variables)
    if (
        lower.num_dims + lower.num_symbols + upper.num_dims + upper.num_symbols
        or len(lower.results) != n
        or len(upper.results) != n
        or any(s != 1 for s in band.step_values)
    ):
        return None
    if any(e.eval([], []) != 0 for e in lower.results):
        return None
    return [max(0, e.eval([], [])) for e in upper.results]


class ThreadOverlaps:
    """Who runs each access of one block program, and which elements its points
    touch (cached per op, and per access under the known trips)."""

    def __init__(self, program: Operation, overlays: set[SSAValue]) -> None:
        self.overlays = overlays
        """The program's buffers that may share their bytes with any other."""
        self.threads = BlockThreads(program)
        self.whos: dict[Operation, tuple[Who | None, Operation | None]] = {}
        """Per op touching shared memory: who runs it, and the block-mapped band it
        lies in."""
        self.bands: dict[Operation, int] = {}
        """The block-mapped bands met so far, numbered."""
        self.points: dict[tuple, LazyPoints] = {}
        self.clashes: dict[tuple, tuple[tuple[int, ...], int, int] | None] = {}
        """`_clash`'s answers by the points' contents: a loop's trips often touch
        the same elements from the same threads (a stage `%t mod 2`), each trip's
        points enumerated anew."""

    def who(self, op: Operation) -> tuple[Who | None, Operation | None]:
        """Who runs `op` (None: the check cannot tell), and the block-mapped band
        it lies in."""
        if op in self.whos:
            return self.whos[op]
        band = op.parent_op()
        while band is not None and band is not self.threads.program:
            if isinstance(band, affine.ParallelOp) and mapping_of(band) in (
                BLOCK,
                THREAD,
            ):
                break
            band = band.parent_op()
        if band is self.threads.program:
            band = None
        who: Who | None = None
        block_band: Operation | None = None
        threads = self.threads
        if isinstance(band, affine.ParallelOp) and mapping_of(band) == THREAD:
            extents = _band_extents(band)
            if extents is not None:
                ivs = band.induction_variables
                who = Who(_row_major(ivs, [(0, e - 1) for e in extents]))
        elif isinstance(band, affine.ParallelOp):
            block_band = band
            number = self.bands.setdefault(band, len(self.bands))
            spans = [value_range(iv, {}) for iv in band.induction_variables]
            if all(s is not None for s in spans):
                axes = _row_major(band.induction_variables, spans)  # pyright: ignore
                size = math.prod(s[1] - s[0] + 1 for s in spans)  # pyright: ignore
                if size < 1 << _BAND_BITS:
                    who = Who(axes, -2 - (number << _BAND_BITS), -1)
        elif isinstance(threads.program, affine.ParallelOp):
            if not threads.mapped:
                who = Who(base=_BLOCK_PROGRAM)
            elif threads.dims is not None:  # every thread runs it
                who = Who((((), (0, threads.dims[0] - 1), 1),))
        elif threads.dims is not None:
            spans = [(0, d - 1) for d in threads.dims]
            who = Who(_row_major(threads.ids, spans, reverse=True))
        self.whos[op] = (who, block_band)
        return who, block_band

    def points_of(
        self,
        op: Operation,
        buffer: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap | None,
        run: int,
        roots: list[SSAValue] | None,
        guards: Sequence[Guard],
        known: dict[SSAValue, int],
        ranges: dict[SSAValue, Interval],
    ) -> LazyPoints | None:
        """Which thread touches which element, `op` reaching `run` elements from
        each address through `indices` (and `m`) under `guards`: `roots` as
        `free_roots` found them, the `known` trips fixed, the other roots over
        their `ranges` (a cache `value_range` fills). Enumerated when first asked;
        None where the check cannot tell who runs `op`."""
        who, _ = self.who(op)
        if who is None:
            return None
        # Past `MAX_POINTS` (or where a guard cannot be followed), the guards and
        # their variables (often the block's position: a partial tile) are left
        # out: more points, none lost.
        tries = [(roots, guards)] if roots is not None else []
        if guards:
            tries.append((free_roots(indices, []), []))
        tries = [(r, g) for r, g in tries if r is not None]
        if not tries:
            return None
        key = (op, buffer, trip_values(tries[0][0], known, ranges))
        if key in self.points:
            return self.points[key]
        plans = []
        for variables, within in tries:
            axes = _axes_of(who, variables, known, ranges)
            if axes is not None:
                fixed = {r: known[r] for r in variables if r in known}
                plans.append((axes, within, fixed))

        def compute() -> Points | None:
            for axes, within, fixed in plans:
                found = index_points(indices, m, within, axes, fixed, MAX_POINTS)
                if found is not None:
                    return _points(found, who, run)
            return None

        lazy = self.points[key] = LazyPoints(compute)
        return lazy

    def race(self, a: Access, b: Access, *, twice: bool = False) -> Found | None:
        """Whether `a` and `b` (one of them a write, no barrier between) may touch
        one element from two threads: None if not, else what shows it (an element
        and its two threads, or nothing where the check cannot tell). With `twice`
        (`a` is `b`, an asynchronous copy), one thread touching an element twice is
        a race too."""
        if not a.overlaps(b, self.overlays):
            return None
        if a.buffer is b.buffer and a.points is not None and b.points is not None:
            pa, pb = a.points.get(), b.points.get()
            if pa is not None and pb is not None:
                key = (a.points.content(), b.points.content(), pa is pb, twice)
                if key not in self.clashes:
                    self.clashes[key] = _clash(pa, pb, twice)
                found = self.clashes[key]
                if found is None:
                    return None
                element, first, second = found
                name = a.buffer.name_hint or "<shared>"
                at = f"%{name}[{', '.join(map(str, element))}]"
                names = self.threads.name(first), self.threads.name(second)
                return Found(at, *names)
        if a.band is not None and a.band == b.band:
            return None  # iterations of one band: independent by its contract
        return Found()


def trip_values(
    roots: Sequence[SSAValue],
    known: dict[SSAValue, int],
    ranges: dict[SSAValue, Interval],
) -> tuple:
    """What the known trips say of `roots`: a value, else a range (a loop's bounds
    may depend on the trip of one enclosing it); a key for what is computed of
    them."""
    return tuple(known[r] if r in known else value_range(r, ranges) for r in roots)


def _axes_of(
    who: Who,
    roots: Sequence[SSAValue],
    known: dict[SSAValue, int],
    ranges: dict[SSAValue, Interval],
) -> list[Axis] | None:
    """The variables to enumerate: who runs the access, and every root not known
    (None where one has no range)."""
    named = {v for values, _, _ in who.axes for v in values}
    axes: list[Axis] = [(values, span) for values, span, _ in who.axes]
    for r in roots:
        if r in known or r in named:
            continue
        span = value_range(r, ranges)
        if span is None:
            return None
        axes.append(([r], span))
    return axes


@dataclass(frozen=True)
class Found:
    """What shows a race: an element and the two threads touching it (nothing
    where the check could not tell which thread touches what)."""

    element: str = ""
    first: str = ""
    second: str = ""

    def text(self, first: str, second: str) -> str:
        if not self.element:
            return ""
        if self.first == self.second:
            return f" ({self.first} {first} into {self.element} twice)"
        return f" ({self.first} {first} {self.element}, {self.second} {second} it)"


def _row_major(
    values: Sequence, spans: Sequence[Interval], *, reverse: bool = False
) -> tuple[tuple[tuple[SSAValue, ...], Interval, int], ...]:
    """Axes numbering the points of `spans` row-major (the first varies slowest; with
    `reverse`, the first varies fastest, as thread ids x, y, z do); each entry of
    `values` one value or several naming the same variable."""
    order = list(range(len(spans)))
    if not reverse:
        order.reverse()
    strides = [0] * len(spans)
    stride = 1
    for k in order:
        strides[k] = stride
        stride *= spans[k][1] - spans[k][0] + 1
    return tuple(
        (tuple(v) if isinstance(v, tuple) else (v,), span, strides[k])
        for k, (v, span) in enumerate(zip(values, spans, strict=True))
    )


def _points(
    found: tuple[list[np.ndarray], list[np.ndarray]], who: Who, run: int
) -> Points:
    """The elements and keys of the points `index_points` found."""
    results, values = found
    count = len(results[0]) if results else len(values[0]) if values else 1
    keys = np.full(count, who.base, np.int64)
    for (_, (lo, _), stride), v in zip(who.axes, values, strict=False):
        keys += who.sign * stride * (v - lo)
    columns = [np.broadcast_to(r, (count,)) for r in results]
    elements = np.stack(columns or [np.zeros(count)], axis=1).astype(np.int64)
    if run > 1:
        step = np.zeros((1, run, elements.shape[1]), np.int64)
        step[0, :, -1] = np.arange(run)
        elements = (elements[:, None, :] + step).reshape(-1, elements.shape[1])
        keys = np.repeat(keys, run)
    return elements, keys


def _clash(
    a: Points, b: Points, twice: bool
) -> tuple[tuple[int, ...], int, int] | None:
    """An element that `a` and `b` touch from two threads (or, with `twice`, an
    element `a` touches at two points), with its two threads' keys."""
    (ea, ka), (eb, kb) = a, b
    if not len(ea) or not len(eb):
        return None
    if a is b:
        ids, _ = _element_ids(ea, ea[:0])
        order = np.argsort(ids, kind="stable")
        ids, keys = ids[order], ka[order]
        same = ids[1:] == ids[:-1]
        if not twice:  # two points of an element with different keys
            same &= keys[1:] != keys[:-1]
        found = np.flatnonzero(same)
        if not len(found):
            return None
        i, j = order[found[0]], order[found[0] + 1]
        return tuple(ea[i].tolist()), int(ka[i]), int(ka[j])
    ia, ib = _element_ids(ea, eb)
    common = np.intersect1d(ia, ib)
    if not len(common):
        return None
    in_a, in_b = np.isin(ia, common), np.isin(ib, common)
    ids = np.concatenate([ia[in_a], ib[in_b]])
    keys = np.concatenate([ka[in_a], kb[in_b]])
    order = np.lexsort((keys, ids))
    ids, keys = ids[order], keys[order]
    found = np.flatnonzero((ids[1:] == ids[:-1]) & (keys[1:] != keys[:-1]))
    if not len(found):
        return None
    e = ids[found[0]]
    at_a, at_b = np.unique(ka[ia == e]), np.unique(kb[ib == e])
    for x in at_a.tolist():
        for y in at_b.tolist():
            if x != y:
                row = ea[np.argmax(ia == e)]
                return tuple(row.tolist()), int(x), int(y)
    raise AssertionError("an element of two keys has two different ones")


def _element_ids(ea: np.ndarray, eb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One integer per element (row of indices) of `ea` and `eb`, equal where the
    rows are."""
    both = np.concatenate([ea, eb])
    lo, hi = both.min(axis=0), both.max(axis=0)
    spans = (hi - lo + 1).tolist()
    if math.prod(spans) < 1 << 62:
        strides = np.array(
            [math.prod(spans[k + 1 :]) for k in range(len(spans))], np.int64
        )
        ids = (both - lo) @ strides
    else:
        _, ids = np.unique(both, axis=0, return_inverse=True)
        ids = ids.reshape(-1)
    return ids[: len(ea)], ids[len(ea) :]


def varies_by_thread(root: SSAValue) -> bool:
    """Whether `root` (a block argument or a GPU id) may differ between the threads of
    a block: thread and lane ids, the variables of block- and thread-mapped bands."""
    if isinstance(root, BlockArgument):
        owner = root.block.parent_op()
        if isinstance(owner, gpu.LaunchOp):
            return 3 <= root.index < 6
        if isinstance(owner, affine.ParallelOp):
            return mapping_of(owner) != GRID
        return False
    return isinstance(root.owner, gpu.ThreadIdOp | gpu.LaneIdOp)


def _meet(a: Span, b: Span) -> bool:
    """Whether two spans share an index."""
    if a is None or b is None:
        return True
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return not a.isdisjoint(b)
    if isinstance(a, frozenset):
        a, b = b, a
    assert isinstance(a, tuple)
    if isinstance(b, frozenset):
        return any(a[0] <= x <= a[1] for x in b)
    return a[0] <= b[1] and b[0] <= a[1]


def _span_text(span: Span) -> str:
    if span is None:
        return "*"
    if isinstance(span, frozenset):
        if not span:
            return "{}"
        lo, hi = min(span), max(span)
        if len(span) == hi - lo + 1:
            return str(lo) if lo == hi else f"{lo}..{hi}"
        return f"{{{', '.join(map(str, sorted(span)[:4]))}{', ...' * (len(span) > 4)}}}"
    return str(span[0]) if span[0] == span[1] else f"{span[0]}..{span[1]}"
