# The largest difference between a compiled (aot_eager) and an eager running mean stays small.
# /// bisect-case
# requires = "cpu"
# timeout = 60
# metric = "max_abs_diff"
# threshold = 1e-4
# tags = ["demo", "metric"]
# ///
import torch


def running_mean(values):
    out, total = [], 0.0
    for count, value in enumerate(values, 1):
        total += value
        out.append(total / count)
    return out


values = [((i * 13) % 17) / 17.0 for i in range(128)]
compiled = torch.compile(running_mean, backend="aot_eager")(values)
diff = max(abs(a - b) for a, b in zip(compiled, running_mean(values), strict=False))
print(f"METRIC max_abs_diff={diff:.6g}")
