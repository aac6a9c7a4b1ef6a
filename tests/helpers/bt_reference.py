"""An independent Bradley-Terry fit for the tests: METHOD section 1's objective written pair by pair (scipy)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit

RIDGE = 1e-4


def scipy_bt(doc_index, scores, n: int, ridge: float = RIDGE) -> np.ndarray:
    """Reference: the METHOD section 1 objective written pair by pair, minimised by L-BFGS in float64."""
    win, lose, label, weight = [], [], [], []
    for docs, sc in zip(doc_index, scores):
        keep = docs >= 0
        docs, sc = docs[keep], sc[keep]
        w = len(docs)
        for i in range(w):
            for j in range(i + 1, w):
                a, b = (docs[i], docs[j]) if sc[i] >= sc[j] else (docs[j], docs[i])
                win.append(a)
                lose.append(b)
                label.append(np.clip(expit(abs(sc[i] - sc[j])), 0.01, 0.99))
                weight.append(2.0 / w)
    win, lose, label, weight = map(np.asarray, (win, lose, label, weight))

    def f(theta):
        d = theta[win] - theta[lose]
        loss = -(weight * (label * log_expit(d) + (1 - label) * log_expit(-d))).sum() / weight.sum()
        loss += 0.5 * ridge * (theta**2).sum()
        r = weight * (expit(d) - label) / weight.sum()
        grad = np.bincount(win, r, minlength=n) - np.bincount(lose, r, minlength=n) + ridge * theta
        return loss, grad

    res = minimize(f, np.zeros(n), jac=True, method="L-BFGS-B",
                   options={"maxiter": 20000, "ftol": 1e-16, "gtol": 1e-12, "maxcor": 30})
    return res.x - res.x.mean()
