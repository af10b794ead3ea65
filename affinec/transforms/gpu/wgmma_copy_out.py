"""The output side of a Hopper kernel's text: the copy-out of a block's f32 tile
(the epilogue applied on the way: scale, bias, residual, ReLU, ReLU6, the conversion
to the output's type), and with split-K the raw partial sums into the workspace and
the kernel that adds them in order (`sum_kernel`).
"""

from __future__ import annotations

import re

from affinec.transforms.gpu.wgmma_plan import GemmKernel


def output_shape(g: GemmKernel) -> tuple[int, ...]:
    if g.conv:
        return (g.conv.n, g.conv.out_h, g.conv.out_w, g.conv.k)
    return (g.m, g.n)


STORE_BYTES = 16
"""The widest store a thread makes (`st.global.v4.b32`)."""

ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4}


def store_width(g: GemmKernel) -> int:
    """The elements of C one thread moves at a time: a 16-byte vector's worth where
    the tile's rows and C's rows are made of whole vectors (so a vector is wholly
    inside C or wholly outside, and 16-byte aligned), else 1; 1 for a split's
    partial sums (the sum kernel writes C)."""
    width = STORE_BYTES // ELEMENT_BYTES[g.out_dtype]
    if g.splits > 1 or g.tile_n % width or g.n % width:
        return 1
    return width


def copy_out(g: GemmKernel, part: int | None = None) -> str:
    """The block's tile out of shared memory into C, `store_width(g)` elements a
    thread at a time (16-byte loads of the f32 tile, the epilogue on the vector,
    one 16-byte store), or element by element; rows and columns past C's edge
    skipped. With consumer warpgroups of their own tiles (`part`: the cooperative
    schedule), the `part`-th one's rows, its values' names suffixed."""
    rows = g.tile_m // g.parts
    tile = "%tile" if part is None else f"%tile{part}"
    width = store_width(g)
    # the row within the part's tiles; the tile's row is offset by the part's first
    row = "%lr" if part else "%r"
    if width == 1:
        lines = [
            f"      scf.for %e = %tid to %{'tile' if part is None else 'part'}_size "
            "step %threads {",
            f"        {row} = arith.divui %e, %tile_n : index",
            "        %c = arith.remui %e, %tile_n : index",
            "        %gc = arith.addi %col0, %c : index",
        ]
    else:
        lines = [
            f"      %vectors = arith.constant {rows * g.tile_n // width} : index",
            f"      %row_vectors = arith.constant {g.tile_n // width} : index",
            f"      %width = arith.constant {width} : index",
            "      scf.for %e = %tid to %vectors step %threads {",
            f"        {row} = arith.divui %e, %row_vectors : index",
            "        %cv = arith.remui %e, %row_vectors : index",
            "        %c = arith.muli %cv, %width : index",
            "        %gc = arith.addi %col0, %c : index",
        ]
    if part:
        lines.append(f"        %first_row = arith.constant {part * rows} : index")
        lines.append("        %r = arith.addi %lr, %first_row : index")
    indent = "        "
    conv = g.conv
    if conv:
        # the tile's row is a pixel of the block's box_h x box_w
        lines += [
            "        %i = arith.divui %r, %box_w : index",
            "        %j = arith.remui %r, %box_w : index",
            "        %oh = arith.addi %oh0, %i : index",
            "        %ow = arith.addi %ow0, %j : index",
            f"        %out_h = arith.constant {conv.out_h} : index",
            f"        %out_w = arith.constant {conv.out_w} : index",
            f"        %n = arith.constant {g.n} : index",
            "        %in_h = arith.cmpi ult, %oh, %out_h : index",
            "        %in_w = arith.cmpi ult, %ow, %out_w : index",
            "        %in_n = arith.cmpi ult, %gc, %n : index",
            "        %in_hw = arith.andi %in_h, %in_w : i1",
            "        %inside = arith.andi %in_hw, %in_n : i1",
            "        scf.if %inside {",
        ]
        indent = "          "
        at = "%image, %oh, %ow, %gc"
        guarded = True
    else:
        lines.append("        %gr = arith.addi %row0, %r : index")
        at = "%gr, %gc"
        guarded = bool(g.m % g.tile_m or g.n % g.tile_n)
    if guarded and not conv:
        lines += [
            f"        %m = arith.constant {g.m} : index",
            f"        %n = arith.constant {g.n} : index",
            "        %in_m = arith.cmpi ult, %gr, %m : index",
            "        %in_n = arith.cmpi ult, %gc, %n : index",
            "        %inside = arith.andi %in_m, %in_n : i1",
            "        scf.if %inside {",
        ]
        indent = "          "
    tile_type = f"memref<{rows}x{g.tile_n}xf32, 3>"
    if width == 1:
        lines.append(f"{indent}%v = memref.load {tile}[{row}, %c] : {tile_type}")
    else:
        lines.append(
            f"{indent}%v = vector.load {tile}[{row}, %c] : {tile_type}, "
            f"vector<{width}xf32>"
        )
    if g.splits > 1:  # the split's partial sum, as it is: the sum kernel ends it
        if conv:
            lines += [
                f"{indent}%pixels = arith.constant {conv.out_h * conv.out_w} : index",
                f"{indent}%image_row = arith.muli %image, %pixels : index",
                f"{indent}%row_of_oh = arith.muli %oh, %out_w : index",
                f"{indent}%gm0 = arith.addi %image_row, %row_of_oh : index",
                f"{indent}%gm = arith.addi %gm0, %ow : index",
            ]
        gm = "%gm" if conv else "%gr"
        lines.append(
            f"{indent}memref.store %v, %partial[%split, {gm}, %gc] : {partial_type(g)}"
        )
    else:
        lines += epilogue_lines(g, "%v", at, indent, width)
    if guarded:
        lines.append("        }")
    lines.append("      }")
    text = "\n".join(lines)
    if part is None:
        return text
    # the loop's own values, renamed per part (the loops are siblings)
    defined = set(re.findall(r"(%[a-z_0-9]+) = ", text)) | {"%e"}
    return re.sub(
        r"%[a-z_0-9]+\b",
        lambda m: f"{m.group(0)}_p{part}" if m.group(0) in defined else m.group(0),
        text,
    )


def epilogue_lines(
    g: GemmKernel, value: str, at: str, indent: str, width: int = 1
) -> list[str]:
    """The epilogue of the f32 `value` of C's element at `at` (its column `%gc`),
    converted and stored; of the `width` elements from there, as vectors, where
    `width` > 1."""
    c_name, out = g.names[2], g.out_dtype
    output = f"memref<{'x'.join(map(str, output_shape(g)))}x{out}>"

    def typed(element: str) -> str:
        return element if width == 1 else f"vector<{width}x{element}>"

    def load(buffer: str, t: str, where: str, element: str) -> str:
        if width == 1:
            return f"memref.load {buffer}[{where}] : {t}"
        return f"vector.load {buffer}[{where}] : {t}, {typed(element)}"

    def constant(name: str, number: str) -> list[str]:
        scalar = f"{indent}{name} = arith.constant {number} : f32"
        if width == 1:
            return [scalar]
        return [
            scalar.replace(f"{name} =", f"{name}_s ="),
            f"{indent}{name} = vector.broadcast {name}_s : f32 to {typed('f32')}",
        ]

    f32 = typed("f32")
    lines = []
    for step in g.epilogue:
        if step in ("scale", "bias", "residual"):
            t, where = (
                (output.replace(f"x{out}>", f"x{g.dtype}>"), at)
                if step == "residual"
                else (f"memref<{g.n}x{g.dtype}>", "%gc")
            )
            lines += [
                f"{indent}%{step}_v = {load(f'%{step}', t, where, g.dtype)}",
                f"{indent}%{step}_f = arith.extf %{step}_v : {typed(g.dtype)} to {f32}",
                f"{indent}%{step}_r = arith.{'mulf' if step == 'scale' else 'addf'} "
                f"{value}, %{step}_f : {f32}",
            ]
            value = f"%{step}_r"
        else:
            lines += [
                *constant("%zero_f", "0.000000e+00"),
                f"{indent}%relu = arith.maximumf {value}, %zero_f : {f32}",
            ]
            value = "%relu"
            if step == "relu6":
                lines += [
                    *constant("%six", "6.000000e+00"),
                    f"{indent}%relu6 = arith.minimumf {value}, %six : {f32}",
                ]
                value = "%relu6"
    if out != "f32":
        lines.append(f"{indent}%o = arith.truncf {value} : {f32} to {typed(out)}")
        value = "%o"
    if width == 1:
        lines.append(f"{indent}memref.store {value}, %{c_name}[{at}] : {output}")
    else:
        lines.append(
            f"{indent}vector.store {value}, %{c_name}[{at}] : {output}, {typed(out)}"
        )
    return lines


def partial_type(g: GemmKernel) -> str:
    """The workspace of a split: each split's f32 sums of C's rows x columns."""
    return f"memref<{g.splits}x{g.m}x{g.n}xf32>"


SUM_THREADS = 256


def sum_kernel(g: GemmKernel, operands: list[tuple[str, str]], c_type: str) -> str:
    """The second kernel of a split: each thread adds one element's partial sums in
    the splits' order (deterministic), then the epilogue."""
    c = g.conv
    args = ", ".join(
        [f"%partial: {partial_type(g)}"]
        + [f"%{name}: {t}" for name, t in operands]
        + [f"%{g.names[2]}: {c_type}"]
    )
    lines = [
        f"    gpu.func @{g.function}_sum({args}) kernel {{",
        "      %tid = gpu.thread_id x",
        "      %bx = gpu.block_id x",
        f"      %threads = arith.constant {SUM_THREADS} : index",
        "      %first = arith.muli %bx, %threads : index",
        "      %e = arith.addi %first, %tid : index",
        f"      %total = arith.constant {g.m * g.n} : index",
        f"      %columns = arith.constant {g.n} : index",
        "      %inside = arith.cmpi ult, %e, %total : index",
        "      scf.if %inside {",
        "        %gm = arith.divui %e, %columns : index",
        "        %gc = arith.remui %e, %columns : index",
    ]
    value = None
    for z in range(g.splits):
        lines += [
            f"        %z{z} = arith.constant {z} : index",
            f"        %p{z} = memref.load %partial[%z{z}, %gm, %gc] : "
            f"{partial_type(g)}",
        ]
        if value is None:
            value = f"%p{z}"
        else:
            lines.append(f"        %s{z} = arith.addf {value}, %p{z} : f32")
            value = f"%s{z}"
    at = "%gm, %gc"
    if c:
        lines += [
            f"        %pixels = arith.constant {c.out_h * c.out_w} : index",
            f"        %out_w = arith.constant {c.out_w} : index",
            "        %image = arith.divui %gm, %pixels : index",
            "        %pixel = arith.remui %gm, %pixels : index",
            "        %oh = arith.divui %pixel, %out_w : index",
            "        %ow = arith.remui %pixel, %out_w : index",
        ]
        at = "%image, %oh, %ow, %gc"
    assert value is not None
    lines += epilogue_lines(g, value, at, "        ")
    lines += ["      }", "      gpu.return", "    }"]
    return "\n".join(lines)


__all__ = [
    "SUM_THREADS",
    "copy_out",
    "output_shape",
    "partial_type",
    "store_width",
    "sum_kernel",
]
