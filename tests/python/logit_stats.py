"""How far one backend's logits are from another's: the KL measure the oracle tests
(test_correctness.py) and the CUDA end-to-end check (tests/backend_cuda/e2e_logits.py) share."""
import numpy as np

# Log-softmax in float64, a few rows at a time: whole-array passes over Gemma's 262,144-wide
# rows made temporaries of gigabytes, and took 250 of the Gemma test's 590 s on a 2-core host.
ROWS = 8


def log_softmax(x):
    """float64 log-softmax of each row of the float32 rows x."""
    r = x.astype(np.float64)
    r -= r.max(axis=-1, keepdims=True)
    r -= np.log(np.exp(r).sum(axis=-1, keepdims=True))
    return r


def kl_rows(ref, got):
    """KL(softmax(ref) || softmax(got)) of each row."""
    kl = []
    for i in range(0, len(ref), ROWS):
        lp, lq = log_softmax(ref[i:i + ROWS]), log_softmax(got[i:i + ROWS])
        kl.append((np.exp(lp) * (lp - lq)).sum(axis=-1))
    return np.concatenate(kl)


def mean_kl(ref, got):
    """Mean over rows of KL(softmax(ref) || softmax(got))."""
    return float(kl_rows(ref, got).mean())
