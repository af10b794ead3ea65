"""Whole torch models through `affinec.torch.convert`, against the same models on
torch (cuDNN) in the same run: time per forward pass and the outputs' agreement.

    scripts/gpu_python.sh benchmarks/torch_models.py --model resnet50 mobilenet_v2 \
        --batch 1 32 --json /tmp/affinec-gpu/torch_models.json

Each model (`affinec.torch.networks`, random weights, random batch-norm statistics)
runs in f16, channels_last, in inference mode: torch's own (its convolutions on
cuDNN, `cudnn.benchmark` on) and the converted one (every convolution on affinec,
batch norms folded and ReLUs fused; the rest — pooling, additions, the classifier —
still torch's). The converted model is run once first, which compiles every shape
(timed apart). The time per forward pass is the median of `--repeat` passes between
CUDA events; affinec's runtime synchronizes after each of its kernels, so its figure
includes that. The outputs are compared with the model's in float64. With
`--any-batch`, the converted model runs kernels of any batch (`affinec.torch.convert(
model, any_batch=True)`): give batches of one bucket (`--batch 8 12 15`) to see the
later ones compile nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings


def _forward_ms(model, x, repeat: int) -> float:
    import torch

    times = []
    with torch.no_grad():
        for _ in range(repeat):
            start, end = torch.cuda.Event(True), torch.cuda.Event(True)
            start.record()
            model(x)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    from affinec.torch.networks import TORCH_NETWORKS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", nargs="+", default=list(TORCH_NETWORKS), choices=TORCH_NETWORKS
    )
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 32])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--any-batch",
        action="store_true",
        help="convert with kernels of any batch (one per batch bucket: a new batch "
        "in a bucket compiles nothing; see the first pass's time)",
    )
    parser.add_argument("--json")
    args = parser.parse_args(argv)

    import torch

    import affinec.torch as at
    from affinec.torch.networks import randomize_batch_norms

    if not torch.cuda.is_available():
        print("error: no CUDA GPU (torch.cuda.is_available() is False)")
        return 1
    torch.backends.cudnn.benchmark = True
    rows = []
    for name in args.model:
        model = randomize_batch_norms(TORCH_NETWORKS[name]()).eval().cuda()
        reference = model.double()
        half = TORCH_NETWORKS[name]()
        half.load_state_dict(model.state_dict())
        half = half.eval().cuda().half().to(memory_format=torch.channels_last)
        fast = at.convert(half, any_batch=args.any_batch)
        for batch in args.batch:
            x = torch.randn(batch, 3, 224, 224, device="cuda")
            x16 = x.half().to(memory_format=torch.channels_last)
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as fell_back, torch.no_grad():
                warnings.simplefilter("always")
                got = fast(x16)
            compile_s = time.perf_counter() - start
            with torch.no_grad():
                expected = reference(x.double())
                ours = half(x16)
            error = float((got.double() - expected).norm() / expected.norm())
            torch_error = float((ours.double() - expected).norm() / expected.norm())
            row = {
                "model": name,
                "batch": batch,
                "any_batch": args.any_batch,
                "affinec_ms": _forward_ms(fast, x16, args.repeat),
                "torch_ms": _forward_ms(half, x16, args.repeat),
                "first_pass_s": compile_s,
                "error": error,
                "torch_error": torch_error,
                "fallbacks": sorted({str(w.message) for w in fell_back}),
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print(f"{'model':<14} {'batch':>5} {'affinec ms':>11} {'torch ms':>9} "
          f"{'torch/ours':>10} {'error':>9} {'torch err':>9} {'1st pass s':>10}")  # fmt: skip
    for r in rows:
        print(
            f"{r['model']:<14} {r['batch']:>5} {r['affinec_ms']:>11.3f} "
            f"{r['torch_ms']:>9.3f} {r['torch_ms'] / r['affinec_ms']:>10.2f} "
            f"{r['error']:>9.1e} {r['torch_error']:>9.1e} {r['first_pass_s']:>10.1f}"
        )
    if args.json:
        from affinec.driver.benchmark import device_description

        with open(args.json, "w") as f:
            json.dump({"device": device_description(), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
