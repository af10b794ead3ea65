"""`affinec tune`: tune a spec on the GPU and cache its fastest configuration
(`--dry-run`: rank the candidates with the cost model alone), or show the cache
(`--list`); the subcommand's flags. The tuning itself is `affinec.tuning`'s.
"""

from __future__ import annotations

import argparse
import sys

from affinec.base.extras import install_hint
from affinec.base.spec import Spec
from affinec.hardware.chips import ARCHS, DEFAULT_ARCH
from affinec.tools.cli_flags import UsageError, spec_from_args


def _tune_options(args: argparse.Namespace, arch: str):
    from affinec.tuning import TuneOptions

    return TuneOptions(
        budget_s=args.budget_s,
        top=args.top,
        explore=args.explore,
        finalists=args.finalists,
        max_candidates=args.max_candidates,
        jobs=args.jobs,
        arch=arch,
        seed=args.seed,
        progress=not args.no_progress and sys.stderr.isatty(),
        measure_cudnn=args.cudnn,
    ).validate()


def cmd_tune(args: argparse.Namespace) -> int:
    """`affinec tune --list`, or tune one spec (see affinec.tuning)."""
    from affinec.tuning import TuningCache

    cache = TuningCache(args.cache)
    if args.list:
        if args.kind:
            raise UsageError("--list shows the cache and takes no spec")
        print(format_cache(cache))
        return 0
    if not args.kind:
        raise UsageError(
            "give a spec to tune (affinec tune conv --n ... ) or --list to show "
            "the cache"
        )
    if args.kind == "network":
        return _tune_network(args, cache)
    if args.dry_run:
        return _tune_dry_run(args, cache)
    if args.ray is not None:
        _tune_options(args, args.arch or DEFAULT_ARCH)  # flags checked first
        return _tune_ray(args, cache, [spec_from_args(args.kind, args)])
    if args.measure == "cost-model":
        return _tune_by_the_cost_model(args, cache)
    from affinec.backend.runtime import current_arch, require_gpu
    from affinec.tuning import cached_entry, tune_and_store

    # Every flag is checked before the GPU is asked for.
    _tune_options(args, args.arch or DEFAULT_ARCH)
    spec = spec_from_args(args.kind, args)
    require_gpu()
    arch = args.arch or current_arch()
    options = _tune_options(args, arch)
    if not args.force and (entry := cached_entry(spec, arch, cache)) is not None:
        print(f"spec: {spec.to_text()}")
        print(
            f"cached ({cache.path}): {entry.config.describe()}: {entry.ms:.4f} ms on "
            f"{entry.gpu}, tuned {entry.tuned_at} (--force tunes again)"
        )
        return 0
    log = _log_path(args, cache, spec)
    result = tune_and_store(spec, options, cache, log=log)
    print(result.report())
    print(f"log: {log}")
    if result.best is not None:
        print(f"cache: {cache.path}")
    _tune_plot(result, log)
    return 0 if result.best is not None else 1


def _tune_by_the_cost_model(args: argparse.Namespace, cache) -> int:
    """`--measure cost-model` without Ray: the whole tuning, the model's
    predictions taken as the times (affinec.tuning.model_measure)."""
    from affinec.tuning import tune_and_store
    from affinec.tuning.model_measure import CostModelMeasurer

    options = _tune_options(args, args.arch or "sm_90")  # the model's GPU
    spec = spec_from_args(args.kind, args)
    log = _log_path(args, cache, spec)
    result = tune_and_store(spec, options, cache, CostModelMeasurer(spec), log=log)
    print(result.report())
    print(
        "measured by the cost model: no kernel ran, the times are its predictions "
        "and nothing was checked against float64"
    )
    print(f"log: {log}")
    if result.best is not None:
        print(f"cache: {cache.path}")
    return 0 if result.best is not None else 1


def _tune_ray(args: argparse.Namespace, cache, specs: list[Spec], zoo_layers=()) -> int:
    """Tune `specs` over a Ray cluster (affinec.tuning.distributed): print a line
    per shape as it finishes, then each network's table (`zoo_layers`: (name,
    batch, layers)) per GPU model, then the summary table."""
    from affinec.tuning.distributed import connect, tune_specs_ray

    if args.cudnn:
        raise UsageError("--cudnn is not timed through --ray (tune without it)")
    connect(args.ray or None)
    model = args.measure == "cost-model"
    options = _tune_options(args, args.arch or ("sm_90" if model else DEFAULT_ARCH))
    zoo = tune_specs_ray(
        specs,
        options,
        cache,
        measure=args.measure,
        arch=args.arch,
        timeout_s=args.measure_timeout_s,
        budget_s=getattr(args, "network_budget_s", None),
        force=args.force,
    )
    for gpu in dict.fromkeys(t.gpu for t in zoo.shapes):
        by_spec = {t.spec: t for t in zoo.shapes if t.gpu == gpu}
        for name, batch, layers in zoo_layers:
            print(f"{name} at batch {batch} on {gpu}:")
            _network_table(layers, [by_spec[layer.spec] for layer in layers])
    print(zoo.table())
    print(f"cache: {cache.path}")
    # as without Ray: shapes left when the budget ran out are no failure
    failed = any(t.outcome in ("failed", "refused") for t in zoo.shapes)
    return 1 if failed else 0


def _log_path(args: argparse.Namespace, cache, spec: Spec):
    import hashlib
    from pathlib import Path

    folder = Path(args.log_dir) if args.log_dir else cache.path.parent / "logs"
    digest = hashlib.sha256(spec.to_text().encode()).hexdigest()[:10]
    return folder / f"{spec.kind}-{digest}.jsonl"


def _tune_plot(result, log) -> None:
    from affinec.tuning.plots import SpecTimes, plot_tuning, plots_available

    if not plots_available():
        print(f"plots: matplotlib is not installed ({install_hint('matplotlib')})")
        return
    path = plot_tuning(
        [
            SpecTimes(
                result.spec.describe(),  # pyright: ignore[reportAttributeAccessIssue]
                [r.to_json() for r in result.records],
                result.cudnn_ms,
            )
        ],
        log.with_suffix(".png"),
    )
    print(f"plot: {path}")


def _tune_dry_run(args: argparse.Namespace, cache) -> int:
    """Enumerate, compile and rank without a GPU; print the model's favourites."""
    from affinec.tuning import tune, write_log

    options = _tune_options(args, args.arch or "sm_90")
    spec = spec_from_args(args.kind, args)
    result = tune(spec, None, options)
    ranked = sorted(
        (r for r in result.records if r.rank is not None), key=lambda r: r.rank or 0
    )
    print(f"spec: {spec.to_text()}")
    print(f"{'rank':>4} {'pred. ms':>9} {'regs':>4} {'thr':>4} {'occ':>5}  config")
    for r in ranked[: options.top]:
        print(
            f"{r.rank:>4} {r.predicted_ms:9.4f} {r.registers:>4} {r.threads:>4} "
            f"{r.occupancy:5.2f}  {r.config.describe()}"
        )
    print(result.report())
    if args.log_dir:
        log = _log_path(args, cache, spec)
        write_log(result, log)
        print(f"log: {log}")
    return 0


def add_network_arguments(parser: argparse.ArgumentParser) -> None:
    """`affinec tune network NAME --batch B`: its own flags, then the tuner's."""
    from affinec.frontend.networks import NETWORKS

    parser.add_argument(
        "name", choices=NETWORKS, nargs="+", help="the network (several: a zoo)"
    )
    parser.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=[1],
        help="images (default 1; several: each network at each)",
    )
    parser.add_argument(
        "--dtype", choices=("f16", "bf16", "f32"), default="f16", help="(default f16)"
    )
    parser.add_argument(
        "--network-budget-s",
        type=float,
        help="wall time for the whole zoo (default 300; with --ray: none): after it "
        "no compile or screening measurement starts, the shapes screened are "
        "finished and cached, the others listed as skipped (exit status 0 unless a "
        "shape failed)",
    )
    add_tune_arguments(parser, given_before=False)


def _tune_network(args: argparse.Namespace, cache) -> int:
    """Tune (or, with --dry-run, rank) every distinct convolution of the networks at
    the batches (affinec.tuning.many), then print each network's layers with their
    counts and totals, and last a summary. Exit status 1 if a shape failed (nothing
    measured was right, or every candidate was refused) or the GPU faulted; shapes
    left when the budget ran out are listed, and the others' entries kept."""
    from pathlib import Path

    from affinec.frontend.networks import network
    from affinec.tuning.many import tune_zoo

    budget = args.network_budget_s
    if min(args.batch) < 1 or (budget is not None and budget <= 0):
        raise UsageError("--batch and --network-budget-s must be positive")
    zoo = [
        (name, batch, network(name, batch, args.dtype))
        for name in dict.fromkeys(args.name)
        for batch in dict.fromkeys(args.batch)
    ]
    specs = list(dict.fromkeys(layer.spec for *_, layers in zoo for layer in layers))
    for name, batch, layers in zoo:
        print(f"{name} at batch {batch}: {len(layers)} distinct convolutions")
    if len(zoo) > 1:
        print(f"{len(zoo)} networks and batches: {len(specs)} distinct convolutions")
    if args.ray is not None and not args.dry_run:
        _tune_options(args, args.arch or DEFAULT_ARCH)  # flags checked first
        return _tune_ray(args, cache, specs, zoo)
    measurer_for, gpu, arch = None, "", args.arch or "sm_90"
    if args.dry_run:
        pass
    elif args.measure == "cost-model":
        from affinec.tuning.model_measure import COST_MODEL_GPU, CostModelMeasurer

        measurer_for, gpu = CostModelMeasurer, COST_MODEL_GPU
    else:
        from affinec.backend.runtime import current_arch, require_gpu
        from affinec.tuning import GpuMeasurer
        from affinec.tuning.measure import gpu_name

        _tune_options(args, args.arch or DEFAULT_ARCH)  # flags checked first
        require_gpu()
        arch = args.arch or current_arch()
        gpu = gpu_name()

        def measurer_for(spec):
            return GpuMeasurer(spec, args.seed)

    options = _tune_options(args, arch)
    zoo_run = tune_zoo(
        specs,
        options,
        cache,
        budget_s=300.0 if budget is None else budget,
        gpu=gpu,
        measurer_for=measurer_for,
        force=args.force,
        log_dir=Path(args.log_dir) if getattr(args, "log_dir", None) else None,
    )
    by_spec = dict(zip(specs, zoo_run.shapes, strict=True))
    for name, batch, layers in zoo:
        if len(zoo) > 1:
            print(f"{name} at batch {batch}:")
        _network_table(layers, [by_spec[layer.spec] for layer in layers])
    if args.dry_run:
        print("ranked only (--dry-run): nothing cached; ~ms: the model's prediction")
    elif args.measure == "cost-model":
        print(
            "measured by the cost model: no kernel ran, the times are its "
            "predictions and nothing was checked against float64"
        )
    if not args.dry_run:
        print(f"cache: {cache.path}")
    print(_zoo_table(zoo, by_spec))
    print(zoo_run.summary())
    return 1 if zoo_run.failed else 0


def _zoo_table(zoo, by_spec) -> str:
    """A line per network and batch: its shapes by outcome, and the time of the
    layers with an entry (each times its count), tuned and with config_for."""
    head = (
        f"{'network':<16} {'batch':>5} {'shapes':>6} {'tuned':>5} {'cached':>6} "
        f"{'skipped':>7} {'refused':>7} {'failed':>6} {'tuned ms':>9} "
        f"{'config_for':>10} {'gain':>6}"
    )
    lines = [head]
    for name, batch, layers in zoo:
        outcomes = [by_spec[layer.spec].outcome for layer in layers]
        timed = [
            (layer.count, e.ms, e.baseline_ms)
            for layer in layers
            if (e := by_spec[layer.spec].entry) is not None and e.baseline_ms
        ]
        tuned = sum(n * ms for n, ms, _ in timed)
        base = sum(n * b for n, _, b in timed)
        gain = f"{base / tuned:5.2f}x" if tuned else f"{'-':>6}"
        lines.append(
            f"{name:<16} {batch:>5} {len(layers):>6} {outcomes.count('tuned'):>5} "
            f"{outcomes.count('cached'):>6} {outcomes.count('skipped'):>7} "
            f"{outcomes.count('refused'):>7} {outcomes.count('failed'):>6} "
            f"{tuned:9.3f} {base:10.3f} {gain}"
        )
    return "\n".join(lines)


def _network_table(layers, results) -> None:
    """Each layer with its count, outcome and times; the network's total."""
    total = baseline = 0.0
    complete = True
    print(f"{'layer':<38} {'count':>5} {'outcome':>8} {'ms':>9} {'config_for':>10}")
    for layer, t in zip(layers, results, strict=True):
        e = t.entry
        ms = f"{e.ms:9.4f}" if e is not None else f"{'-':>9}"
        if t.outcome == "ranked" and t.result is not None:
            predicted = [r.predicted_ms for r in t.result.records if r.predicted_ms]
            ms = f"~{min(predicted):8.4f}" if predicted else ms
        base = (
            f"{e.baseline_ms:10.4f}"
            if e is not None and e.baseline_ms
            else f"{'-':>10}"
        )
        print(f"{layer.name:<38} {layer.count:>5} {t.outcome:>8} {ms} {base}")
        if e is None or not e.baseline_ms:
            complete = False
            continue
        total += layer.count * e.ms
        baseline += layer.count * e.baseline_ms
    if complete and total:
        print(f"total: {total:.3f} ms tuned, {baseline:.3f} ms with config_for "
              f"({baseline / total:.2f}x)")  # fmt: skip


def format_cache(cache) -> str:
    """What `affinec tune --list` prints: every entry, stale ones marked."""
    from affinec.tuning import compiler_version

    entries = cache.entries()
    current = compiler_version()
    if not entries:
        return f"the tuning cache {cache.path} holds no configurations"
    lines = [f"tuning cache {cache.path} (this compiler: {current})"]
    for e in sorted(entries, key=lambda e: (e.spec, e.gpu, e.tuned_at)):
        speedup = (
            f", {e.baseline_ms / e.ms:.2f}x config_for"
            if e.baseline_ms and e.ms
            else ""
        )
        cudnn = f", {e.cudnn_ms / e.ms:.2f}x cuDNN" if e.cudnn_ms and e.ms else ""
        stale = "" if e.compiler == current else f"  [stale: compiler {e.compiler}]"
        lines.append(e.spec)
        lines.append(
            f"    {e.gpu}, {e.arch}: {e.ms:.4f} ms{speedup}{cudnn}, {e.measured} "
            f"measured, tuned {e.tuned_at}{stale}"
        )
        lines.append(f"    {e.config.describe()}")
    return "\n".join(lines)


def _ray_address(text: str) -> str:
    """`--ray`'s address, which must not be the kind that follows a bare `--ray`."""
    if text in ("conv", "matmul", "network"):
        raise argparse.ArgumentTypeError(
            f"'{text}' is a kind, not the cluster's address: write --ray=ADDRESS, "
            "or --ray after the spec"
        )
    return text


def add_tune_arguments(parser: argparse.ArgumentParser, *, given_before: bool) -> None:
    """The flags of `affinec tune [KIND]` beyond the spec's. They may come before the
    kind too (`affinec tune --dry-run conv ...`): the `tune` parser takes them with
    their defaults (`given_before`) and the kind's parser without any, so that a flag
    given before the kind is not overwritten by the kind's default."""
    from affinec.tuning import MAX_CANDIDATES

    def flag(*names: str, **options) -> None:
        if not given_before:
            options["default"] = argparse.SUPPRESS
        parser.add_argument(*names, **options)

    flag(
        "--budget-s",
        type=float,
        default=120.0,
        help="wall time for tuning the spec, compiling included (default 120)",
    )
    flag(
        "--top",
        type=int,
        default=24,
        help="configurations measured in the cost model's order (default 24)",
    )
    flag(
        "--explore",
        type=int,
        default=8,
        help="more measured at random from the rest of the ranking, to check the "
        "model (default 8)",
    )
    flag(
        "--finalists",
        type=int,
        default=3,
        help="the fastest, timed again with the benchmark's full method (default 3)",
    )
    flag(
        "--max-candidates",
        type=int,
        default=MAX_CANDIDATES,
        help="configurations compiled, chosen by the cost model (default "
        f"{MAX_CANDIDATES})",
    )
    flag(
        "--jobs",
        type=int,
        default=0,
        help="compiler processes (default 0: every core but one)",
    )
    flag(
        "--arch",
        choices=ARCHS,
        help="GPU architecture (default: the current GPU's; sm_90 for --dry-run)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of inputs and picks")
    flag(
        "--log-dir",
        help="where the JSON-lines log (and plot) goes (default: logs/ beside the "
        "cache)",
    )
    flag("--cudnn", action="store_true", help="also time cuDNN on the same inputs")
    flag("--force", action="store_true", help="tune even if the cache has the spec")
    flag(
        "--dry-run",
        action="store_true",
        help="no GPU: enumerate, compile and rank with the cost model only",
    )
    flag("--no-progress", action="store_true", help="no progress bars on stderr")
    flag(
        "--ray",
        nargs="?",
        const="",
        type=_ray_address,
        metavar="ADDRESS",
        help="tune through a Ray cluster: compiles on its CPUs, measurements on its "
        "GPUs, one actor each (ADDRESS: 'auto', 'ray://host:10001'; none: "
        "$RAY_ADDRESS, else a cluster started on this machine; give it as "
        "--ray=ADDRESS before the spec); needs the `ray` extra",
    )
    flag(
        "--measure",
        choices=("gpu", "cost-model"),
        default="gpu",
        help="gpu (default), or cost-model: no GPU, the cost model's predictions "
        "taken as the times (for CI; cached under a GPU name of their own)",
    )
    flag(
        "--measure-timeout-s",
        type=float,
        default=120.0,
        help="with --ray: a measurement that takes longer (a kernel that hangs) "
        "is recorded as timed out and its actor restarted (default 120)",
    )
    if given_before:
        return  # the `tune` parser has its own --cache
    parser.add_argument(
        "--cache",
        default=argparse.SUPPRESS,
        help="the tuning cache file (default: $AFFINEC_TUNING_CACHE, else "
        "$XDG_CACHE_HOME/affinec/tuning.json)",
    )
