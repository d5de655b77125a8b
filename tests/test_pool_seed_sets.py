"""benchmarks/learning/pool_seed_sets.py's two tests against their textbook definitions: Brown-Forsythe computed
here from the absolute deviations about each side's median, Mann-Whitney's exact p by enumerating every split of
the ranks and its normal approximation with the tie correction written out; and no spread p from 2 seeds a side."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from benchmarks.learning.learning_vs_minimax_report import mann_whitney_p
from benchmarks.learning.pool_seed_sets import difference_interval, row, spread_p

# One seed stuck low on the first side: skewed, so centring on the mean instead of the median changes the p a lot.
STUCK_LOW = ([0.61, 0.70, 0.72, 0.75, 0.20], [0.66, 0.70, 0.71, 0.69, 0.73])


def spread_by_hand(a: list[float], b: list[float], center=np.median) -> float:
    """One-way ANOVA's F on the absolute deviations about each side's center, then F(1, n - 2)'s upper tail."""
    groups = [np.abs(np.asarray(side, np.float64) - center(side)) for side in (a, b)]
    pooled = np.concatenate(groups)
    between = sum(len(g) * (g.mean() - pooled.mean()) ** 2 for g in groups)
    within = sum(((g - g.mean()) ** 2).sum() for g in groups) / (len(pooled) - 2)
    return float(stats.f.sf(between / within, 1, len(pooled) - 2))


def exact_mann_whitney_by_hand(a: list[float], b: list[float]) -> float:
    """Two-sided exact p without ties: under the null every choice of len(a) of the pooled ranks is equally likely;
    p is the share of choices whose U lies at least as far from its mean as the observed U."""
    rank = {value: position for position, value in enumerate(sorted(a + b), start=1)}
    u_of = lambda ranks: sum(ranks) - len(a) * (len(a) + 1) / 2  # noqa: E731
    observed, mean = u_of([rank[value] for value in a]), len(a) * len(b) / 2
    splits = [u_of(chosen) for chosen in itertools.combinations(range(1, len(a) + len(b) + 1), len(a))]
    return sum(abs(u - mean) >= abs(observed - mean) for u in splits) / len(splits)


def normal_mann_whitney_by_hand(a: list[float], b: list[float]) -> float:
    """Two-sided p of the normal approximation with midranks, the tie-corrected variance and the continuity
    correction: sigma^2 = n1 n2 / 12 ((n + 1) - sum(t^3 - t) / (n (n - 1))), t the size of each group of ties."""
    pooled = sorted(a + b)
    midrank = {value: (pooled.index(value) + 1 + pooled.index(value) + pooled.count(value)) / 2 for value in pooled}
    n1, n2, n = len(a), len(b), len(pooled)
    u = sum(midrank[value] for value in a) - n1 * (n1 + 1) / 2
    ties = sum(pooled.count(value) ** 3 - pooled.count(value) for value in set(pooled))
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    return min(1.0, math.erfc((abs(u - n1 * n2 / 2) - 0.5) / sigma / math.sqrt(2)))


@pytest.mark.parametrize(
    ("a", "b"), [STUCK_LOW, ([0.2, 0.5, 0.9], [0.4, 0.45, 0.5, 0.55]), ([0.3, 0.1, 0.2, 0.25], [0.9, 0.1, 0.5])]
)
def test_spread_p_is_brown_forsythe(a, b):
    """Mutation checked by hand: `center="mean"` (Levene's original test) in spread_p fails this test."""
    assert spread_p(a, b) == pytest.approx(spread_by_hand(a, b), rel=1e-9)


def test_the_stuck_low_seeds_tell_the_median_from_the_mean():
    """The data above can fail a spread test about another center: about the means the p is 0.06, not 0.26."""
    assert spread_p(*STUCK_LOW) == pytest.approx(0.2576, abs=1e-4)
    assert spread_by_hand(*STUCK_LOW, center=np.mean) == pytest.approx(0.0608, abs=1e-4)


def test_two_seeds_a_side_get_no_spread_p():
    """Two seeds lie equally far from their median: the within-side variance is 0 and F is infinite (p near 0)
    however alike the sides are, so such a side gets no spread p and its row a "-" (Mann-Whitney's p stays).
    Mutation checked by hand: refusing only fewer than 2 seeds a side in spread_p fails this test."""
    assert spread_p([0.1, 0.2], [0.3, 0.5, 0.9]) is None
    assert spread_p([0.1, 0.2, 0.3], [0.3, 0.5]) is None
    assert spread_p([0.5] * 3, [0.5] * 3) == 1.0, "no spread on either side: alike (Levene's test gives NaN)"
    one_seed = row("quantity", {"cleanued": [0.5], "minimax": [0.3, 0.4]}, 200)
    assert one_seed.startswith("| quantity | 1/2 |") and one_seed.endswith("| - | - | - | - |"), one_seed
    two_against_three = row("quantity", {"cleanued": [0.1, 0.2], "minimax": [0.3, 0.5, 0.6]}, 200)
    assert two_against_three.startswith("| quantity | 2/3 |")
    assert two_against_three.endswith("| 0.20 | - |"), two_against_three  # exact: 2 of the C(5, 2) splits
    three_against_three = row("quantity", {"cleanued": [0.1, 0.2, 0.4], "minimax": [0.3, 0.5, 0.6]}, 200)
    spread = spread_by_hand([0.1, 0.2, 0.4], [0.3, 0.5, 0.6])
    assert three_against_three.endswith(f"| {spread:.2f} |"), three_against_three


def test_mann_whitney_exact_without_ties():
    """All three apart from all three: 2 of the C(6, 3) = 20 splits are as extreme, p = 0.1. Mutation checked by
    hand: the normal approximation in mann_whitney_p (method="asymptotic" always) fails this test."""
    assert mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1, rel=1e-12)
    for a, b in (([1, 2, 3], [4, 5, 6]), ([1, 3, 5], [2, 4, 6, 7]), ([0.9, 0.2, 0.4, 0.7], [0.3, 0.1, 0.5, 0.6, 0.8])):
        assert mann_whitney_p(a, b) == pytest.approx(exact_mann_whitney_by_hand(a, b), rel=1e-12)


def test_mann_whitney_normal_approximation_with_ties():
    """Tied seeds: the exact null assumes none, so the normal approximation with the tie correction is used.
    Mutation checked by hand: the exact p in mann_whitney_p (method="exact" always) fails this test."""
    for a, b in (([0.5, 0.5, 0.9], [0.5, 0.7, 0.8, 0.8]), ([0.25, 0.5, 0.5, 0.75], [0.5, 0.75, 0.75, 1.0, 1.0])):
        assert mann_whitney_p(a, b) == pytest.approx(normal_mann_whitney_by_hand(a, b), rel=1e-9)
    assert mann_whitney_p([0.4, 0.4], [0.4, 0.4, 0.4]) == 1.0
    assert mann_whitney_p([0.4], [0.1, 0.2]) is None


def test_the_difference_of_the_means_and_its_interval_are_scipys_percentile_bootstrap():
    """Each side resampled on its own, the statistic the difference of the means, a 95% percentile interval (the
    mutation trial's survivors: a median inside the bootstrap, a 90% level)."""
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0.5, 1, 12), np.r_[rng.uniform(0.6, 1, 11), 0.1]
    difference, (low, high) = difference_interval(list(a), list(b), 500)
    expected = stats.bootstrap(
        (a, b), lambda x, y, axis: x.mean(axis) - y.mean(axis), n_resamples=500, confidence_level=0.95,
        method="percentile", rng=np.random.default_rng(0),
    ).confidence_interval  # fmt: skip
    assert difference == pytest.approx(a.mean() - b.mean())
    assert (low, high) == (float(expected.low), float(expected.high))
