"""scripts/gpu_sanitize.py: one small kernel per route for compute-sanitizer; the
routes cover what must run under it, and the compiler accepts them (a few compiled
here; `--compile-only` compiles them all)."""

from repository_scripts import load_script

sanitize = load_script("scripts/gpu_sanitize.py")


def test_the_routes_cover_every_kind_of_kernel():
    routes = sanitize.routes()
    names = [r.name for r in routes]
    assert len(names) == len(set(names))
    for schedule in ("waited", "in-flight", "specialized", "cooperative"):
        assert f"hopper-{schedule}-product" in names
    stages = {r.changes.get("stages") for r in routes if r.name.startswith("mma-")}
    assert {2, 3, 4, 5, 6} <= stages
    splits = {r.knobs.get("splits") for r in routes}
    assert {2, 3, 8} <= splits
    uneven = [r for r in routes if "uneven" in r.name]
    assert uneven and all(r.spec.c % r.knobs["splits"] for r in uneven)
    assert any(r.run_batch and r.run_batch != r.spec.n for r in routes)
    assert any(
        getattr(r.spec, "groups", 1) == getattr(r.spec, "c", 1) > 1 for r in routes
    )
    assert any("residual" in r.spec.epilogue for r in routes)
    # the flattened pixels' row tiles end inside an image
    for r in routes:
        if r.knobs.get("flatten_pixels") and "tile_sizes" in r.changes:
            assert r.changes["tile_sizes"][0] % (r.spec.h * r.spec.w)


def test_routes_compile(capsys):
    names = ["hopper-cooperative-1x1-across-images", "split3-uneven-f16",
             "dynamic-batch-residual"]  # fmt: skip
    assert sanitize.main(["--compile-only", "--jobs", "1", "--route", *names]) == 0
    out = capsys.readouterr().out
    assert "3 routes compiled, 0 not" in out
    assert "grids ['(batch, 1, 1)']" in out
