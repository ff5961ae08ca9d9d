"""One answer: where a confirmation ran, its winner is `best` (tuner.sweep.the_answer),
with the median seed's checkpoint; the search's best stays beside it as search_best.
The CLI prints that answer (answer_lines)."""

from __future__ import annotations

from tuner.cli._answer import answer_lines
from tuner.mlflow_names import STAGE_CONFIRM, STAGE_SEARCH
from tuner.spec import parse_spec
from tuner.sweep import the_answer
from tuner.tracking import model_description
from tuner.views import BestTrial, ConfirmedConfig, SweepSummary, TrialView

SPEC = parse_spec(
    {
        "name": "answer",
        "algorithm": "PPO",
        "env": "CartPole-v1",
        "search": {"num_samples": 2, "space": {"lr": {"loguniform": [1e-4, 1e-2]}}},
        "confirm": {"top_k": 2, "seeds": 2},
    }
)


def trial(trial_id: str, lr: float, score: float, seed: int, stage: str) -> TrialView:
    return TrialView(
        trial_id=trial_id,
        status="TERMINATED",
        config={"lr": lr},
        seed=seed,
        score=score,
        stage=stage,
        checkpoint=f"/runs/{trial_id}/checkpoint_000000",
    )


def summary_with_confirmation() -> SweepSummary:
    # the search's best (lucky seed) is a, the confirmation ranks b first
    trials = [
        trial("a", 1e-3, 30.0, 0, STAGE_SEARCH),
        trial("b", 4e-4, 25.0, 1, STAGE_SEARCH),
        *(trial(f"c{i}", 1e-3, 10.0 + i, 2 + i, STAGE_CONFIRM) for i in range(2)),
        *(trial(f"d{i}", 4e-4, 20.0 + i, 2 + i, STAGE_CONFIRM) for i in range(2)),
    ]
    search_best = BestTrial(
        trial_id="a", config={"lr": 1e-3}, seed=0, metric_value=30.0, checkpoint="/a"
    )
    confirmed = [
        ConfirmedConfig(
            trial_id=tid,
            config={"lr": lr},
            seeds=[2, 3],
            scores=[base, base + 1],
            mean=base + 0.5,
            ci95=[base, base + 1],
            iqm=base + 0.5,
            trials=[f"{prefix}0", f"{prefix}1"],
            median_trial_id=f"{prefix}0",
            checkpoint=f"/runs/{prefix}0/checkpoint_000000",
        )
        for tid, lr, base, prefix in (("b", 4e-4, 20.0, "d"), ("a", 1e-3, 10.0, "c"))
    ]
    return SweepSummary(
        name="answer",
        status="SUCCEEDED",
        metric=SPEC.metric,
        mode="max",
        best=search_best,
        trials=trials,
        confirmation=confirmed,
    )


def test_the_confirmed_winner_is_the_answer_with_its_median_seeds_checkpoint():
    summary = summary_with_confirmation()
    answer = the_answer(SPEC, summary)
    assert answer is not None
    assert answer.source == STAGE_CONFIRM
    assert answer.trial_id == "b"
    assert answer.config == {"lr": 4e-4}
    assert answer.full_config["lr"] == 4e-4
    assert answer.confirmed == summary.confirmation[0]
    assert answer.checkpoint == "/runs/d0/checkpoint_000000"
    assert answer.checkpoint_trial_id == "d0"
    assert answer.seed == 2
    assert answer.metric_value == 25.0  # its search trial's score, under its own name
    assert answer.search_best is not None
    assert answer.search_best.trial_id == "a"
    assert answer.search_best.metric_value == 30.0


def test_without_a_confirmed_mean_the_search_best_stays_the_answer():
    summary = summary_with_confirmation()
    for confirmed in summary.confirmation:
        confirmed.mean = None
    answer = the_answer(SPEC, summary)
    assert answer is not None
    assert answer.source == STAGE_SEARCH
    assert answer.trial_id == "a"


def test_the_cli_prints_the_answer_its_model_and_the_search_best():
    summary = summary_with_confirmation()
    answer = the_answer(SPEC, summary)
    assert answer is not None
    answer.model_version = "models:/answer-best/3"
    lines = answer_lines(answer.model_dump(mode="json"), SPEC.metric)
    assert lines[0].startswith("best config (confirmed on 2 fresh seeds [2, 3])")
    assert "mean 20.5, 95 % CI [20, 21], IQM 20.5" in lines[0]
    assert lines[1] == 'config: {"lr": 0.0004}'
    assert lines[2] == "model: models:/answer-best/3 (checkpoint of trial d0, seed 2)"
    assert lines[3] == "checkpoint: /runs/d0/checkpoint_000000"
    assert lines[4].startswith("search best: trial a, score 30")
    assert lines[4].endswith('config {"lr": 0.001}')


def test_an_unconfirmed_answer_says_so():
    best = summary_with_confirmation().best
    assert best is not None
    (first, *_) = answer_lines(best.model_dump(mode="json"), SPEC.metric)
    assert first.startswith("best trial a: score 30")
    assert "not confirmed on fresh seeds" in first


def test_the_model_versions_description_reads_as_the_answer():
    answer = the_answer(SPEC, summary_with_confirmation())
    assert answer is not None
    text = model_description(answer, SPEC.metric)
    assert "search trial b: lr=0.0004" in text
    assert "Confirmed over 2 fresh seeds" in text
    assert "mean 20.5 (95 % CI 20 to 21, IQM 20.5)" in text
    assert "seed 2, trial d0" in text


def test_a_list_of_sweeps_shows_the_confirmed_mean_where_it_decided_the_answer():
    from tuner.cli._remote import headline

    answer = the_answer(SPEC, summary_with_confirmation())
    assert answer is not None
    assert headline(answer.model_dump(mode="json")) == "20.5 (confirmed mean)"
    search = summary_with_confirmation().best
    assert search is not None
    assert headline(search.model_dump(mode="json")) == "30 (score)"
    assert headline({}) == "-"
