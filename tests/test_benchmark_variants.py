"""benchmarks/networks.py's variants: a variant the compiler refuses for a layer is
skipped and named, never raised out of the script."""

from repository_scripts import load_script

from affinec.frontend.networks import network

networks = load_script("benchmarks/networks.py")


def _layer(name: str):
    return next(layer for layer in network("resnet50", 1) if layer.name == name)


def test_a_refused_variant_is_skipped_and_named(capsys):
    """Hopper's kernel split in 2 on a 1x1 layer of 64 channels (one channel step of
    64): `config_for` builds it, the wgmma pass refuses it."""
    row: dict = {}
    layer = _layer("stage2 1x1 64-64 @56")
    compiled = networks._variant(
        layer.spec, "wgmma splits=2", {"wgmma": True, "splits": 2}, "sm_90", row
    )
    assert compiled is None
    assert "splits=2" in row["skipped"]["wgmma splits=2"]
    assert "wgmma splits=2: skipped (" in capsys.readouterr().out


def test_an_accepted_variant_compiles():
    row: dict = {}
    layer = _layer("stage2 1x1 64-64 @56")
    compiled = networks._variant(
        layer.spec, "flattened", {"flatten_pixels": True}, "sm_90", row
    )
    assert compiled is not None and compiled.arch == "sm_90"
    assert "skipped" not in row
