# A running sum compiled with Inductor must match eager (runs on the demo mirror's synthetic torch).
# /// bisect-case
# requires = "cpu"
# expect = "pass"
# timeout = 60
# tags = ["demo", "inductor", "numerics"]
# ///
import torch


def running_sum(values):
    out, total = [], 0.0
    for value in values:
        total += value
        out.append(total)
    return out


values = [((i * 37) % 101) / 101.0 for i in range(256)]
expected = running_sum(values)
actual = torch.compile(running_sum, backend="inductor")(values)
torch.testing.assert_close(actual, expected)
print("compiled matches eager")
