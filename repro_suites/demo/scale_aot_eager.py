# Scaling compiled with the aot_eager backend (Dynamo + AOTAutograd, no Inductor) matches eager.
# /// bisect-case
# requires = "cpu"
# timeout = 60
# tags = ["demo", "aot_eager"]
# ///
import torch


def scale(values):
    return [2.5 * value for value in values]


values = [i / 7.0 for i in range(64)]
torch.testing.assert_close(torch.compile(scale, backend="aot_eager")(values), scale(values))
print("aot_eager matches eager")
