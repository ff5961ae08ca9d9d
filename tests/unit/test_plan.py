"""Know before: what a spec costs and whether it fits, from `tuner plan` / `validate`
and the planning function the API's dry run uses."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tuner.cli import app as cli
from tuner.rllib import check_fits
from tuner.spec import SpecError, parse_spec
from tuner.validation import plan_spec

GRID = {
    "method": "grid",
    "num_samples": 2,
    "space": {"lr": {"grid": [1e-4, 3e-4, 1e-3]}, "gamma": {"grid": [0.98, 0.99]}},
}


def spec(**patch):
    data = {"name": "plan", "algorithm": "PPO", "env": "CartPole-v1", "search": GRID}
    data.update(patch)
    return parse_spec(data)


def test_a_3x2_grid_twice_plans_12_trials_and_confirmation_adds_top_k_x_seeds():
    plain = plan_spec(spec(stop={"timesteps_total": 1000}), [{"CPU": 2.0}])
    assert (plain.trials, plain.confirm_trials, plain.max_env_steps) == (12, 0, 12_000)
    confirmed = plan_spec(
        spec(stop={"timesteps_total": 1000}, confirm={"top_k": 3, "seeds": 4}), [{"CPU": 2.0}]
    )
    assert (confirmed.trials, confirmed.confirm_trials) == (12, 12)
    assert confirmed.max_env_steps == 24_000
    assert confirmed.fits


def test_concurrency_and_what_limits_it():
    two_cpus = spec(resources={"num_env_runners": 1})  # driver + one runner: 2 CPUs a trial
    out = plan_spec(two_cpus, [{"CPU": 5.0}])
    assert out.per_trial == {"CPU": 2.0, "GPU": 0.0}  # GPU named even when none
    assert out.bundles
    assert out.concurrent == 2
    assert out.limited_by == "CPU"
    capped = plan_spec(spec(max_concurrent_trials=3), [{"CPU": 64.0}])
    assert (capped.concurrent, capped.limited_by) == (3, "max_concurrent_trials")
    gpus = plan_spec(spec(resources={"num_gpus_per_learner": 0.25}), [{"CPU": 64.0, "GPU": 1.0}])
    assert (gpus.concurrent, gpus.limited_by, gpus.per_trial["GPU"]) == (4, "GPU", 0.25)
    assert list(gpus.per_trial) == ["CPU", "GPU"]
    custom = spec(
        config={"custom_resources_per_env_runner": {"fpga": 1}}, resources={"num_env_runners": 1}
    )
    assert plan_spec(custom, None).per_trial == {"CPU": 2.0, "GPU": 0.0, "fpga": 1.0}


def test_a_trial_that_never_fits_names_the_field_and_both_numbers():
    big = spec(resources={"num_env_runners": 64})
    with pytest.raises(SpecError) as err:
        check_fits(big, [{"CPU": 2.0}])
    (issue,) = err.value.issues
    assert issue.loc == "resources.num_env_runners"
    assert "64 env runners" in issue.msg
    assert "65 CPUs" in issue.msg
    assert "CPU: 2" in issue.msg
    out = plan_spec(big, [{"CPU": 2.0}])
    assert not out.fits
    assert out.problems[0].loc == "resources.num_env_runners"
    assert out.concurrent == 0
    assert out.limited_by == "CPU"


def test_validate_and_plan_check_the_fit_unless_told_not_to(tmp_path, monkeypatch):
    monkeypatch.delenv("TUNER_RAY_ADDRESS", raising=False)
    path = tmp_path / "big.json"
    path.write_text(
        json.dumps(
            {
                "name": "big",
                "algorithm": "PPO",
                "env": "CartPole-v1",
                "resources": {"num_env_runners": 512},
            }
        )
    )
    runner = CliRunner()
    refused = runner.invoke(cli, ["validate", str(path)])
    assert refused.exit_code == 2
    assert "resources.num_env_runners" in refused.output
    assert "513 CPUs" in refused.output
    assert runner.invoke(cli, ["validate", str(path), "--no-fit"]).exit_code == 0
    planned = runner.invoke(cli, ["plan", str(path), "--output", "json"])
    assert planned.exit_code == 2
    body = json.loads(planned.stdout)
    assert body["fits"] is False
    assert body["trials"] == 4
    assert body["problems"]
    assert runner.invoke(cli, ["plan", str(path), "--no-fit"]).exit_code == 0


def test_an_autoscaling_cluster_is_checked_against_what_it_can_grow_to(tmp_path, monkeypatch):
    from tuner.settings import Settings

    monkeypatch.delenv("TUNER_RAY_ADDRESS", raising=False)
    path = tmp_path / "gpu.json"
    path.write_text(
        json.dumps(
            {
                "name": "gpu",
                "algorithm": "PPO",
                "env": "CartPole-v1",
                "resources": {"num_gpus_per_learner": 1},
            }
        )
    )
    runner = CliRunner()
    refused = runner.invoke(cli, ["validate", str(path)], env={"TUNER_CLUSTER_MAX_NODES": ""})
    assert refused.exit_code == 2
    assert "resources.num_gpus_per_learner" in refused.output
    grows = '[{"CPU": 8, "GPU": 1}]'
    ok = runner.invoke(cli, ["validate", str(path)], env={"TUNER_CLUSTER_MAX_NODES": grows})
    assert ok.exit_code == 0, ok.output
    assert Settings(cluster_max_nodes=grows).growth_nodes == [{"CPU": 8.0, "GPU": 1.0}]
    with pytest.raises(ValueError, match="JSON list of node resources"):
        Settings(cluster_max_nodes="[1]")


def test_plan_and_the_dry_run_resolve_the_search_space_once(tmp_path, monkeypatch):
    """`tuner plan` and POST ?dry_run=true resolve the space once and hand that one to
    validation and the plan."""
    import tuner.spec._space
    import tuner.validation._pipeline
    import tuner.validation._plan
    import tuner.validation._validate
    from tuner import validation

    resolved = []
    real = tuner.spec._space.resolve_space

    def counting(spec):
        resolved.append(spec.name)
        return real(spec)

    for module in (
        tuner.spec._space,
        tuner.validation._pipeline,
        tuner.validation._plan,
        tuner.validation._validate,
    ):
        monkeypatch.setattr(module, "resolve_space", counting, raising=False)
    monkeypatch.delenv("TUNER_RAY_ADDRESS", raising=False)
    path = tmp_path / "grid.json"
    body = {"name": "grid", "algorithm": "PPO", "env": "CartPole-v1", "search": GRID}
    path.write_text(json.dumps(body))
    planned = CliRunner().invoke(cli, ["plan", str(path), "--no-fit", "--output", "json"])
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["trials"] == 12
    assert resolved == ["grid"]
    resolved.clear()
    checks = validation.Checks(allowed_modules=[], nodes=[{"CPU": 4.0}], plan=True)
    out = validation.check_body(json.dumps(body).encode(), False, checks)
    assert out["plan"]["trials"] == 12
    assert resolved == ["grid"]


def test_the_docs_say_what_the_fit_check_does():
    """validate/plan check the fit by default (--no-fit skips it); an autoscaling cluster
    is checked against TUNER_CLUSTER_MAX_NODES, not by turning the check off."""
    from pathlib import Path

    from tuner.settings import Settings

    root = Path(__file__).resolve().parents[2]
    arch = (root / "docs" / "architecture.md").read_text()
    assert "does not check the fit" not in arch
    assert "--no-fit" in arch
    texts = {
        "docs/spec.md": (root / "docs" / "spec.md").read_text(),
        "docs/architecture.md": arch,
        "docs/deploy.md": (root / "docs" / "deploy.md").read_text(),
        "TUNER_CLUSTER_FIT_CHECK": Settings.model_fields["cluster_fit_check"].description,
    }
    for where, text in texts.items():
        flat = " ".join(text.split())
        assert "CLUSTER_MAX_NODES" in flat, where
        assert "off for an autoscaling cluster" not in flat.lower(), where
        assert "=false skips both for an autoscaling" not in flat, where


def test_a_custom_resource_the_cluster_lacks_names_the_setting_that_asks_for_it():
    runners = spec(
        config={"custom_resources_per_env_runner": {"fpga": 1}}, resources={"num_env_runners": 2}
    )
    with pytest.raises(SpecError) as err:
        check_fits(runners, [{"CPU": 8.0}])
    (issue,) = err.value.issues
    assert issue.loc == "config.custom_resources_per_env_runner"
    assert issue.value == {"fpga": 1}
    assert "1 fpga per env runner" in issue.msg
    assert "needs 2 fpga" in issue.msg
    assert "the cluster has 0" in issue.msg
    with pytest.raises(SpecError, match="needs 2 fpga; the cluster has 1"):
        check_fits(runners, [{"CPU": 8.0, "fpga": 1.0}])
    check_fits(runners, [{"CPU": 4.0, "fpga": 1.0}, {"CPU": 4.0, "fpga": 1.0}])
    out = plan_spec(runners, [{"CPU": 8.0}])
    assert not out.fits
    assert out.limited_by == "fpga"
    assert [p.loc for p in out.problems] == ["config.custom_resources_per_env_runner"]
    learners = spec(
        config={"custom_resources_per_learner": {"tpu": 0.5}}, resources={"num_learners": 2}
    )
    with pytest.raises(SpecError) as err:
        check_fits(learners, [{"CPU": 8.0}])
    (issue,) = err.value.issues
    assert issue.loc == "config.custom_resources_per_learner"
    assert "0.5 tpu per learner" in issue.msg
    assert "needs 1 tpu; the cluster has 0" in issue.msg
    # short of CPUs as well: the CPUs are named first, as before
    with pytest.raises(SpecError) as err:
        check_fits(runners, [{"CPU": 1.0}])
    assert err.value.issues[0].loc == "resources.num_env_runners"


def test_run_refuses_a_spec_that_cannot_fit_the_local_ray(tmp_path, monkeypatch):
    """`tuner run` checks the spec, its fit on this machine (stubbed here: a 2-CPU node)
    included, before it starts Ray or opens MLflow: nothing starts for a spec that
    cannot run."""
    import tuner.cli._local

    for var in ("TUNER_RAY_ADDRESS", "TUNER_CLUSTER_MAX_NODES", "TUNER_CLUSTER_FIT_CHECK"):
        monkeypatch.delenv(var, raising=False)
    started = []
    from tuner import launcher

    monkeypatch.setattr(launcher, "ensure_ray", lambda address=None, **_: started.append(address))
    monkeypatch.setattr(tuner.cli._local, "target_nodes", lambda settings: [{"CPU": 2.0}])
    path = tmp_path / "big.json"
    big = {"name": "big", "algorithm": "PPO", "env": "CartPole-v1"}
    path.write_text(json.dumps(big | {"resources": {"num_env_runners": 64}}))
    data = tmp_path / "data"
    refused = CliRunner().invoke(cli, ["run", str(path), "--data-dir", str(data)])
    assert refused.exit_code == 2, refused.output
    said = " ".join(refused.output.split())  # as rich wrapped it, unwrapped
    assert "resources.num_env_runners: 64 env runners" in said
    assert "need 65 CPUs" in said
    assert "the cluster has {CPU: 2}" in said
    assert started == []  # no Ray started
    assert not (data / "ray_results").exists()
    assert not (data / "mlflow.db").exists()


def test_the_plan_shows_a_race_its_seeds_and_rule_and_fifo_says_it_stops_nothing(tmp_path):
    raced = {"method": "optuna", "num_samples": 16, "race": {"seeds": 3}}
    out = plan_spec(spec(search=raced, seed=4), [{"CPU": 2.0}])
    assert out.race is not None
    assert out.race["seeds"] == [4, 5, 6]
    assert "best fully raced config's mean" in out.race["rule"]
    assert plan_spec(spec(), [{"CPU": 2.0}]).race is None
    path = tmp_path / "raced.json"
    body = {"name": "plan", "algorithm": "PPO", "env": "CartPole-v1", "search": raced, "seed": 4}
    path.write_text(json.dumps(body))
    printed = CliRunner().invoke(cli, ["plan", str(path), "--no-fit"])
    assert printed.exit_code == 0, printed.output
    assert "race: each config on up to seeds 4, 5, 6; a config runs its next seed" in (
        printed.output
    )
    assert "scheduler: fifo (no early stopping)" in printed.output
