# A running sum compiled with torch.compile must match eager (the synthetic torch of the demo
# mirror rounds compiled outputs to bfloat16 from the planted build on).
import torch


def running_sum(values):
    out, total = [], 0.0
    for value in values:
        total += value
        out.append(total)
    return out


values = [((i * 37) % 101) / 101.0 for i in range(256)]
expected = running_sum(values)
actual = torch.compile(running_sum)(values)
torch.testing.assert_close(actual, expected)
print("compiled matches eager")
