"""benchmarks/learning/action_sampling.py on cleanued's own sampler: two independent draws pass, and samplers changed
where a nearly settled policy is sensitive (a temperature of 1.1; rare moves dropped) are flagged on the tests that
should see them. Nothing here runs minimax."""

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.learning import action_sampling

SAMPLES = 400_000
ROWS = [list(row) for row in action_sampling.LOGITS]


def counts_of(sample=action_sampling.distrax_sample, seed=0) -> list[list[int]]:
    return action_sampling.cleanued_counts(ROWS, SAMPLES, seed, sample)


@pytest.fixture(scope="module")
def reference():
    return counts_of(seed=0)


def test_two_draws_of_one_sampler_pass_and_fit_the_softmax(reference):
    results = action_sampling.compare(ROWS, reference, counts_of(seed=1000))
    assert [row["flagged"] for row in results] == [[]] * len(ROWS)
    assert [row["gap"] for row in results] == [0.0, 2.0, 5.0, 10.0, 14.0, 16.0]
    np.testing.assert_allclose(
        [row["others_cleanued"] for row in results[:4]], [r["others_exact"] for r in results[:4]], rtol=0.1
    )


def test_a_hotter_sampler_is_flagged_against_the_softmax_and_the_reference(reference):
    def hotter(key, logits):
        return distrax.Categorical(logits=logits / 1.1).sample(seed=key)

    results = action_sampling.compare(ROWS, reference, counts_of(hotter, seed=1000))
    flagged = {row["gap"]: row["flagged"] for row in results}
    assert flagged[0.0] == [], "a temperature leaves the uniform row alone"
    assert all(set(flagged[gap]) == {"p_same", "p_minimax_fit"} for gap in (2.0, 5.0, 10.0)), flagged


def test_a_sampler_that_never_draws_rare_moves_is_flagged(reference):
    """As an inverse-CDF sampler on a coarse uniform would: moves below 1e-4 never drawn. The softmax fit sees it
    where the moves are expected often enough (the 10-nat row); below that the data cannot tell."""

    def coarse(key, logits):
        probabilities = jax.nn.softmax(logits)
        return distrax.Categorical(probs=jnp.where(probabilities < 1e-4, 0.0, probabilities)).sample(seed=key)

    results = action_sampling.compare(ROWS, reference, counts_of(coarse, seed=1000))
    flagged = {row["gap"]: row["flagged"] for row in results}
    assert set(flagged[10.0]) == {"p_same", "p_minimax_fit"} and flagged[2.0] == [] and flagged[5.0] == [], flagged


def test_fit_pools_rarely_expected_moves():
    assert action_sampling.fit_p([1000, 0, 0], np.array([1 - 2e-9, 1e-9, 1e-9])) > 0.99  # one pooled bin of the two
    assert action_sampling.fit_p([1000, 5, 5], np.array([1 - 2e-9, 1e-9, 1e-9])) < 1e-6
    assert action_sampling.fit_p([1000], np.array([1.0])) == 1.0
