"""A real browser (Debian's Chromium via Playwright) on the real server's web page."""

from __future__ import annotations

import shutil

import pytest

from tests.e2e.conftest import ARTIFACTS, tiny, wait_for
from tuner.rllib._machine import cpu_description

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (make test installs it as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


def _sweeps_page(server, browser, exp_id: str):
    """The service's page, open on its sweeps list until sweep `exp_id` is listed, and
    the list of the page's errors (filled as they happen)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server.url + "/")
    page.wait_for_selector(f'#experiments-table tr[data-id="{exp_id}"]')
    return page, errors


def test_trial_table_updates_without_reload(server, browser):
    spec = tiny("browser", iterations=6)
    # 4 s an iteration: at 1 s the first rows reached the page with 9 of the 12
    # iterations done on loaded cores (2026-12-02), and under CI's load this test once
    # saw no update at all; each trial now lives 24 s or more (rows shown at 0 and 0)
    spec["config"]["min_time_s_per_iteration"] = 4
    # a batch of 128: PPO's vectorised default gives its trials 4 envs (of 32+ steps
    # each), shown with the best
    spec["config"]["train_batch_size_per_learner"] = 128
    with server.client() as c:
        exp_id = c.post("/experiments", json=spec).json()["id"]
        page, errors = _sweeps_page(server, browser, exp_id)
        page.wait_for_function(
            "() => document.querySelector('#cluster-info').textContent.includes('1 node')"
        )
        assert "2 CPUs" in page.locator("#cluster-info").inner_text()
        page.click(f'#experiments-table tr[data-id="{exp_id}"]')
        page.wait_for_selector("#trials-table tbody tr[data-trial-id]", timeout=120_000)
        page.evaluate("window.__not_reloaded = true")

        def iterations():
            cells = page.locator("#trials-table tbody td.col-iterations").all_inner_texts()
            return sum(int(x or 0) for x in cells)

        first = iterations()
        page.wait_for_function(
            f"""() => [...document.querySelectorAll('#trials-table tbody td.col-iterations')]
                .reduce((s, td) => s + Number(td.textContent || 0), 0) > {first}""",
            timeout=120_000,
        )
        assert iterations() > first
        assert page.evaluate("window.__not_reloaded === true")  # updated in place
        assert page.locator("#experiment-title").inner_text() == "browser"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "sweep-running.png"), full_page=True)
        wait_for(c, exp_id, lambda v: v["status"] == "SUCCEEDED", timeout=180)
        page.wait_for_function(
            "() => document.querySelector('#experiment-status').textContent.includes('SUCCEEDED')",
            timeout=30_000,
        )
        assert "lr" in page.locator("#best-config").inner_text()
        # each trial names the CPU and torch's kernels it trained on (this machine's)
        page.wait_for_function(
            "() => [...document.querySelectorAll('#trials-table tbody td.col-cpu')]"
            ".every((td) => td.textContent !== '')",
            timeout=30_000,
        )
        cpus = page.locator("#trials-table tbody td.col-cpu").all_inner_texts()
        assert cpus == [cpu_description()] * 2
        cell = page.locator("#trials-table tbody td.col-cpu span").first
        assert cell.get_attribute("title") == cpu_description()  # all of it on hover
        # its start only: the trials' MLflow links stay on screen beside it
        link = page.locator("#trials-table tbody td.col-mlflow_url a").first.bounding_box()
        assert link["x"] + link["width"] <= 1400
        assert page.locator("#best-resources").inner_text() == "num_envs_per_env_runner: 4"
        page.wait_for_selector("#curves .plot-container", timeout=30_000)
        # two trials are too few to rank hyperparameters: the importance panel says so
        page.wait_for_selector("#importance-note:not([hidden])", timeout=30_000)
        assert "finished trials" in page.locator("#importance-note").inner_text()
        page.screenshot(path=str(ARTIFACTS / "sweep-finished.png"), full_page=True)
        assert not errors, errors


def test_a_raced_sweeps_answer_shows_its_seeds_and_their_mean(server, browser):
    """search.race: the answer box says the best config's score is its mean over the
    seeds it ran, and lists them with their scores, as `best.race` has them."""
    spec = tiny("raced", iterations=1)
    spec["search"] = {
        "method": "optuna",
        "num_samples": 3,
        "space": {"lr": {"loguniform": [1e-4, 1e-3]}},
        "race": {"seeds": 2},
    }
    spec["max_concurrent_trials"] = 1
    spec["seed"] = 2
    with server.client() as c:
        exp_id = c.post("/experiments", json=spec).json()["id"]
        view = wait_for(c, exp_id, lambda v: v["status"] == "SUCCEEDED", timeout=240)
        race = view["best"]["race"]
        assert sorted(race["seeds"]) == [2, 3]  # the first config always runs both
        # its score is its seeds' mean, as the store's curves score them
        assert view["best"]["metric_value"] == pytest.approx(race["mean"])
        assert race["mean"] == pytest.approx(sum(race["scores"]) / 2)
        page, errors = _sweeps_page(server, browser, exp_id)
        page.click(f'#experiments-table tr[data-id="{exp_id}"]')
        page.wait_for_selector("#best-race:not([hidden])", timeout=60_000)
        shown = page.locator("#best-race").inner_text()
        assert shown.startswith("mean "), shown
        assert f"over seeds {', '.join(str(x) for x in race['seeds'])}" in shown, shown
        assert "(mean over 2 seeds, " in page.locator("#best-metric").inner_text()
        assert page.locator("#best-title").inner_text() == "Best config (raced)"
        # the trials table tells a config's seeds apart
        page.wait_for_function(
            "() => document.querySelectorAll('#trials-table tbody td.col-seed').length === 3",
            timeout=60_000,
        )
        seeds = page.locator("#trials-table tbody td.col-seed").all_inner_texts()
        assert sorted(seeds) == sorted(
            str(t["seed"]) for t in c.get(f"/experiments/{exp_id}/trials").json()["items"]
        )
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "sweep-raced.png"), full_page=True)
        assert not errors, errors


def test_a_sweep_stopped_while_its_page_is_open_shows_its_trials_as_they_ended(server, browser):
    """The page fetches a terminal sweep's trials one last time: that fetch must not get
    the trials from before the stop (the server's view cache drops them when the sweep's
    view finds it STOPPED), or the table would say RUNNING under a STOPPED sweep. Each
    trial shows the status the server holds: PAUSED, or TERMINATED where a loaded machine
    let it run out its iterations before the stop landed."""
    spec = tiny("browser-stop", iterations=30)  # the stop lands long before 30 s of trial
    spec["config"]["min_time_s_per_iteration"] = 1
    with server.client() as c:
        exp_id = c.post("/experiments", json=spec).json()["id"]
        page, errors = _sweeps_page(server, browser, exp_id)
        page.click(f'#experiments-table tr[data-id="{exp_id}"]')

        def statuses() -> list[str]:
            return page.locator("#trials-table tbody td.col-status").all_inner_texts()

        page.wait_for_function(
            """() => [...document.querySelectorAll('#trials-table tbody td.col-status')]
                .filter((td) => td.textContent.includes('RUNNING')).length === 2""",
            timeout=120_000,
        )
        assert c.post(f"/experiments/{exp_id}/stop").status_code == 202
        wait_for(c, exp_id, lambda v: v["status"] == "STOPPED", timeout=120)
        page.wait_for_function(
            "() => document.querySelector('#experiment-status').textContent.includes('STOPPED')",
            timeout=30_000,
        )
        page.wait_for_timeout(3_000)  # several polls: the table is the final fetch's
        shown = statuses()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "sweep-stopped.png"), full_page=True)
        assert len(shown) == 2, shown
        assert not any("RUNNING" in status for status in shown), shown
        held = [t["status"] for t in c.get(f"/experiments/{exp_id}/trials").json()["items"]]
        assert sorted(held) == sorted(_status_word(status) for status in shown), (held, shown)
        assert "PAUSED" in held  # the stop paused at least the trial with iterations left
        assert not errors, errors


def _status_word(cell: str) -> str:
    """The trial status a status cell names."""
    return next(word for word in ("PAUSED", "TERMINATED", "ERROR", "RUNNING") if word in cell)


def test_page_with_200_trials(server, browser):
    """200 trials (written through the real store) render, sort and chart in place."""
    from tuner.store import MetricPoint, Store

    store = Store(f"sqlite:///{server.data_dir / 'tuner.db'}")
    spec = {**tiny("wide"), "metric": "env_runners/episode_return_mean", "mode": "max"}
    # ended as it is created: the server's supervisor never sees it QUEUED (and launches it)
    rec = store.create_experiment(name="wide", spec=spec, warnings=[], ended="STOPPED")
    key = "env_runners/episode_return_mean"
    for i in range(200):
        tid = f"wide_{i:05d}"
        store.upsert_trial(
            rec.id,
            tid,
            status="TERMINATED",
            config={"lr": 1e-4 * (i + 1)},
            iterations=3,
            env_steps=300,
            metric=float(i),
            best_metric=float(i),
        )
        store.add_metric_points(
            rec.id,
            tid,
            [
                MetricPoint(iteration=k, env_steps=100 * k, time_s=k, values={key: float(i + k)})
                for k in (1, 2, 3)
            ],
        )
    confirmed = [
        {
            "trial_id": "wide_00199",
            "config": {"lr": 0.02},
            "seeds": [200, 201, 202],
            "scores": [190.0, 210.0, 200.0],
            "mean": 200.0,
            "std": 10.0,
            "ci95": [190.0, 210.0],
            "iqm": 200.0,
            "trials": ["c_0", "c_1", "c_2"],
        },
        {
            "trial_id": "wide_00198",
            "config": {"lr": 0.0199},
            "seeds": [200, 201, 202],
            "scores": [150.0, 170.0, 160.0],
            "mean": 160.0,
            "std": 10.0,
            "ci95": [150.0, 170.0],
            "iqm": 160.0,
            "trials": ["c_3", "c_4", "c_5"],
        },
    ]
    store.update_experiment(
        rec.id,
        confirmation=confirmed,
        importance={"lr": 0.8, "gamma": 0.2},
        importance_ped_anova={"lr": 0.6, "gamma": 0.4},
    )
    store.close()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server.url}/#/experiments/{rec.id}")
    # the confirmation table: best mean first, with each config's interval drawn
    page.wait_for_selector("#confirm-panel:not([hidden]) #confirm-table tbody tr")
    rows = page.locator("#confirm-table tbody tr")
    assert rows.count() == 2
    assert "wide_00199" in rows.nth(0).inner_text()
    assert "[190, 210]" in rows.nth(0).inner_text()
    page.wait_for_selector("#confirm-chart .plot-container", timeout=30_000)
    assert page.locator("#confirm-chart .errorbar").count() == 2
    page.wait_for_function(
        "() => document.querySelectorAll('#trials-table tbody tr[data-trial-id]').length == 200",
        timeout=60_000,
    )
    page.wait_for_selector("#curves .plot-container", timeout=60_000)
    assert page.locator("#curves .scatterlayer .trace").count() == 200
    # hyperparameter importance beside the parallel coordinates: two evaluators, two keys
    page.wait_for_selector("#importance .plot-container", timeout=30_000)
    assert page.locator("#importance .barlayer .point").count() == 4
    assert page.locator("#importance-note").is_hidden()  # final: the sweep has ended
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sweep-200-trials.png"))


TINY_YAML = """\
name: {name}
algorithm: PPO
env: CartPole-v1
config: {{train_batch_size_per_learner: 128, minibatch_size: 64, num_epochs: 1}}
model: {{fcnet_hiddens: [16]}}
search:
  method: grid
  num_samples: 2
  space: {{lr: {{grid: [0.0001, 0.001]}}}}
stop: {{training_iteration: 1}}
max_concurrent_trials: 2
"""


def preview_until(page, spec_text: str, selector: str, prefix: str) -> None:
    """Paste a spec, preview it, and wait until `selector`'s text starts with `prefix`."""
    page.fill("#spec-text", spec_text)
    page.click("#preview-button")
    page.wait_for_function(
        f"() => document.querySelector('{selector}').textContent.startsWith('{prefix}')",
        timeout=120_000,
    )


def test_new_sweep_form_previews_and_submits_with_token_auth(browser, tmp_path):
    """Paste a spec, preview it (trials, concurrency, fit; problems next to their field),
    submit it, see it in the list; a spec that does not fit previews as such and a 4xx
    after Submit is shown; the API wants a token and the page sends it; the page runs
    under its Content-Security-Policy without a violation."""
    from tests.e2e.conftest import Server

    token = "form-token-1"
    # one sweep at a time: a second Submit while the first runs is a 429
    server = Server(tmp_path / "data", TUNER_API_TOKEN=token, TUNER_MAX_ACTIVE_SWEEPS="1")
    server.start()
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "console",
            lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
        )
        page.goto(server.url + "/")
        page.wait_for_selector("#token-box:not([hidden])")  # 401: the page asks for it
        page.fill("#token-input", token)
        page.click("#token-box button")
        page.click("#new-sweep-link")
        page.wait_for_selector("#new-view:not([hidden])")
        page.wait_for_function(
            "() => document.querySelectorAll('#example-select option').length > 5"
        )
        page.select_option("#example-select", "cartpole-ppo")
        assert "algorithm: PPO" in page.input_value("#spec-text")

        page.fill("#spec-text", TINY_YAML.format(name="bad name"))
        # typed over: the dropdown no longer names the example
        assert page.input_value("#example-select") == ""
        page.click("#preview-button")
        page.wait_for_selector("#spec-problems:not([hidden])", timeout=120_000)
        assert "name" in page.locator("#spec-problems").inner_text()
        assert page.is_disabled("#submit-button")

        # a trial bigger than the cluster (2 CPUs): the plan says so and names the field
        too_big = TINY_YAML.format(name="too-big") + "resources: {num_env_runners: 64}\n"
        page.fill("#spec-text", too_big)
        page.click("#preview-button")
        page.wait_for_selector("#plan-box:not([hidden])", timeout=120_000)
        assert page.locator("#plan-fits").inner_text() == "no"
        problems = page.locator("#spec-problems").inner_text()
        assert "resources.num_env_runners" in problems, problems
        assert "65 CPUs" in problems, problems
        assert page.locator("#new-status").inner_text() == "It does not fit the cluster."
        assert page.is_disabled("#submit-button")

        # the README's form, a scheduler and a budget in env steps: the plan shows the
        # scheduler's settings in force, counted in env steps
        asha = TINY_YAML.format(name="asha-steps").replace(
            "stop: {training_iteration: 1}",
            "stop: {timesteps_total: 3000}\nscheduler: {type: asha}",
        )
        preview_until(page, asha, "#plan-scheduler", "asha")
        shown = page.locator("#plan-scheduler").inner_text()
        assert shown.startswith("asha counting num_env_steps_sampled_lifetime:"), shown
        assert "max_t 3,000" in shown, shown
        assert "rungs at 3,000" in shown, shown

        # hyperband over 16 trials: each bracket's trials and rungs, as the CLI prints them
        hyperband = (
            TINY_YAML.format(name="hyperband-16")
            .replace(
                "method: grid\n  num_samples: 2\n  space: {lr: {grid: [0.0001, 0.001]}}",
                "method: optuna\n  num_samples: 16\n  space: {lr: {loguniform: [0.0001, 0.001]}}",
            )
            .replace(
                "stop: {training_iteration: 1}",
                "stop: {timesteps_total: 3000}\nscheduler: {type: hyperband}",
            )
        )
        preview_until(page, hyperband, "#plan-scheduler", "hyperband")
        shown = page.locator("#plan-scheduler").inner_text()
        assert "; bracket 1: 10 trials, rungs at 1,000, 3,000" in shown, shown
        assert "; bracket 2: 6 trials, rungs at 3,000" in shown, shown

        # fifo with an iteration limit that ends every trial before its env steps: the
        # plan warns, naming both stop criteria, whatever the scheduler
        cut_short = TINY_YAML.format(name="cut-short").replace(
            "stop: {training_iteration: 1}", "stop: {training_iteration: 1, timesteps_total: 3000}"
        )
        preview_until(page, cut_short, "#plan-warnings", "stop.training_iteration (1)")
        shown = page.locator("#plan-warnings").inner_text()
        assert "ends every trial at 128 env steps" in shown, shown
        assert "short of stop.timesteps_total (3000)" in shown, shown
        assert page.locator("#plan-scheduler").inner_text().startswith("fifo")
        page.screenshot(path=str(ARTIFACTS / "new-sweep-cut-short.png"), full_page=True)

        # an optuna search of 16 trials: the sampler in force and its random start
        optuna_16 = TINY_YAML.format(name="optuna-16").replace(
            "method: grid\n  num_samples: 2\n  space: {lr: {grid: [0.0001, 0.001]}}",
            "method: optuna\n  num_samples: 16\n  space: {lr: {loguniform: [0.0001, 0.001]}}",
        )
        preview_until(page, optuna_16, "#plan-sampler", "tpe")
        assert page.locator("#plan-sampler").inner_text() == "tpe, the first 10 trials at random"
        # raced over seeds: the seeds every config may run on, and the rule
        raced = optuna_16.replace("num_samples: 16", "num_samples: 16\n  race: {seeds: 3}")
        raced += "seed: 4\n"
        preview_until(page, raced, "#plan-race", "each config")
        shown = page.locator("#plan-race").inner_text()
        assert shown.startswith("each config on up to seeds 4, 5, 6;"), shown
        assert "best fully raced config's mean" in shown, shown

        page.fill("#spec-text", TINY_YAML.format(name="from-the-form"))
        page.click("#preview-button")
        page.wait_for_selector("#plan-box:not([hidden])", timeout=120_000)
        assert page.locator("#plan-trials").inner_text().startswith("4 search")
        assert page.locator("#plan-fits").inner_text() == "yes"
        assert "limited by" in page.locator("#plan-concurrent").inner_text()
        # capped by iterations (4 trials x 1), not "no limit"
        assert page.locator("#plan-steps").inner_text() == "4 iterations"
        # the env's base settings in force, with their source, as `tuner plan` says them
        assert (
            "(rl_zoo3 hyperparams/ppo.yml CartPole-v1)" in page.locator("#plan-base").inner_text()
        )
        assert page.locator("#plan-warm").inner_text() == "none"
        assert page.locator("#plan-scheduler").inner_text().startswith("fifo")
        assert page.locator("#plan-sampler").inner_text() == "none (grid or random search)"
        assert page.locator("#plan-race").inner_text() == "none (one seed a config)"
        page.screenshot(path=str(ARTIFACTS / "new-sweep-preview.png"), full_page=True)
        page.click("#submit-button")
        page.wait_for_selector("#experiment-view:not([hidden])", timeout=120_000)
        page.wait_for_function(
            "() => document.querySelector('#experiment-title').textContent === 'from-the-form'",
            timeout=60_000,
        )
        # its lr is sampled: before any trial reports, the chart waits, it never says none
        note = page.locator("#parcoords-note").inner_text()
        assert "No sampled hyperparameters" not in note, note
        # a second Submit while that sweep is queued or running: the 429 is shown
        page.goto(server.url + "/#/new")
        page.wait_for_selector("#new-view:not([hidden])")
        page.fill("#spec-text", TINY_YAML.format(name="one-too-many"))
        page.click("#preview-button")
        page.wait_for_selector("#plan-box:not([hidden])", timeout=120_000)
        page.click("#submit-button")
        page.wait_for_selector("#spec-problems:not([hidden])", timeout=60_000)
        assert page.locator("#new-status").inner_text() == "Not submitted (HTTP 429):"
        assert "TUNER_MAX_ACTIVE_SWEEPS" in page.locator("#spec-problems").inner_text()
        assert page.is_visible("#new-view")  # still on the form, the spec kept
        assert "one-too-many" in page.input_value("#spec-text")
        page.goto(server.url + "/#/")
        page.wait_for_selector("#experiments-table td:has-text('from-the-form')")
        assert not errors, errors
        with server.client(headers={"Authorization": f"Bearer {token}"}) as c:
            (sweep,) = c.get("/experiments").json()["items"]
            assert sweep["name"] == "from-the-form"
            assert sweep["spec"]["search"]["num_samples"] == 2
            wait_for(c, sweep["id"], lambda v: v["status"] in {"SUCCEEDED", "FAILED"})
    finally:
        server.stop()
        server.stop_head()


def test_compare_page_ticks_two_sweeps_and_shows_them_side_by_side(server, browser):
    """From the list, tick two sweeps and open the comparison: their best configs in
    columns with the differing key marked, the confirmed mean and CI, both best trials'
    curves on one chart."""
    from tests.stored import METRIC, stored_sweep
    from tuner.store import Store

    store = Store(f"sqlite:///{server.data_dir / 'tuner.db'}")
    ids = [
        stored_sweep(
            store,
            {**tiny(name), "metric": METRIC, "mode": "max"},
            {"lr": lr, "gamma": 0.99},
            score,
            confirmed=19.0 if name == "cmp-a" else None,
        )
        for name, lr, score in (("cmp-a", 1e-3, 20.0), ("cmp-b", 3e-4, 30.0))
    ]
    store.close()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server.url}/#/")
    for sweep_id in ids:
        page.wait_for_selector(f"#experiments-table input.pick[value='{sweep_id}']")
        page.check(f"#experiments-table input.pick[value='{sweep_id}']")
    assert page.is_enabled("#compare-button")
    page.click("#compare-button")
    page.wait_for_selector("#compare-view:not([hidden]) #compare-table tbody tr")
    heads = page.locator("#compare-table thead th").all_inner_texts()
    assert heads[1:] == ["cmp-a", "cmp-b"]
    lr_row = page.locator("#compare-table tbody tr.differs").all_inner_texts()
    assert len(lr_row) == 1
    assert lr_row[0].startswith("lr")
    gamma = page.locator("#compare-table tbody tr:not(.differs)", has_text="gamma")
    assert gamma.count() == 1
    assert "19 [18, 20]" in page.locator("#compare-table tbody").inner_text()
    page.wait_for_selector("#compare-chart .plot-container", timeout=30_000)
    assert page.locator("#compare-chart .scatterlayer .trace").count() == 2
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
    assert not errors, errors


def test_a_sweep_of_two_objectives_shows_its_pareto_front(server, browser):
    """Several objectives over the real server: REST gives the front and each trial's
    values, and the page plots every search trial with the front highlighted."""
    objectives = [
        {"metric": "env_runners/episode_return_mean", "mode": "max"},
        {"metric": "time_total_s", "mode": "min"},
    ]
    spec = tiny(
        "pareto",
        search={
            "method": "optuna",
            "num_samples": 3,
            "space": {"lr": {"loguniform": [1e-4, 1e-2]}},
        },
        objectives=objectives,
        scope="last",
    )
    with server.client() as c:
        created = c.post("/experiments", json=spec)
        assert created.status_code == 201, created.text
        exp_id = created.json()["id"]
        view = wait_for(c, exp_id, lambda v: v["status"] in {"SUCCEEDED", "FAILED"}, timeout=180)
        assert view["status"] == "SUCCEEDED", view
        front = view["pareto"]
        trials = c.get(f"/experiments/{exp_id}/trials").json()["items"]
        both = c.post("/experiments", json={**spec, "name": "both", "metric": "time_total_s"})
        assert both.status_code == 422, both.text  # metric/mode or objectives, not both
        assert "metric" in both.text
        assert "time_total_s" in both.text
    assert front
    assert len(trials) == 3
    assert all(set(t["values"]) == {o["metric"] for o in objectives} for t in trials)
    values = {t["trial_id"]: t["values"] for t in trials}
    for member in front:  # the stored front carries the trials' own values
        assert member["values"] == values[member["trial_id"]]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server.url}/#/experiments/{exp_id}")
    page.wait_for_selector(
        "#pareto-panel:not([hidden]) #pareto-chart .plot-container", timeout=60_000
    )
    # two traces: the other trials and the front (in grey and red); every search trial
    # is a point of one of them, the front's members of the second
    drawn = page.evaluate(
        "() => document.querySelector('#pareto-chart').data.map((t) => [t.name, t.x.length])"
    )
    assert drawn == [["other trials", 3 - len(front)], ["Pareto front", len(front)]]
    assert page.locator("#pareto-chart .scatterlayer .point").count() == 3
    rows = page.locator("#pareto-table tbody tr")
    assert rows.count() == len(front)
    assert rows.first.get_attribute("data-trial") == front[0]["trial_id"]
    meta = page.locator("#experiment-meta").inner_text()
    assert "max env_runners/episode_return_mean, min time_total_s" in meta
    heads = page.locator("#pareto-table thead th").all_inner_texts()
    assert heads[1:3] == [
        "env_runners/episode_return_mean (higher is better)",
        "time_total_s (training seconds, lower is better)",
    ]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "pareto.png"), full_page=True)
    assert not errors, errors


EVAL = "evaluation/env_runners/episode_return_mean"


def _stored(store, name, spec, status, trials, error=None, **fields):
    """A sweep written through the real store, put in `status` (never launched):
    `trials` is {trial_id: (row fields, [(iteration, env_steps, values), ...])}."""
    from tuner.store import MetricPoint

    # ended as it is created: the server's supervisor never sees it QUEUED (and launches it)
    rec = store.create_experiment(name=name, spec=spec, warnings=[], ended=status)
    for trial_id, (row, points) in trials.items():
        store.upsert_trial(rec.id, trial_id, **row)
        store.add_metric_points(
            rec.id,
            trial_id,
            [MetricPoint(iteration=i, env_steps=n, time_s=i, values=v) for i, n, v in points],
        )
    if error is not None or fields:
        store.update_experiment(rec.id, error=error, **fields)
    return rec.id


def _drawn_sweep(server, name):
    """A finished sweep of two objectives, ranked by its at-end evaluation: each of its 3
    trials reports time_total_s at every iteration and the evaluation at its last only;
    two `choice` keys and a loguniform one sampled; one config confirmed."""
    from tuner.store import Store

    store = Store(f"sqlite:///{server.data_dir / 'tuner.db'}")
    objectives = [{"metric": EVAL, "mode": "max"}, {"metric": "time_total_s", "mode": "min"}]
    space = {
        "lr": {"loguniform": [1e-4, 1e-2]},
        "num_epochs": {"choice": [2, 6, 12]},
        "model.fcnet_hiddens": {"choice": [[32], [64, 64]]},
    }
    spec = tiny(
        name,
        search={"method": "optuna", "num_samples": 3, "space": space},
        objectives=objectives,
        evaluation={"at_end": True, "duration": 2},
        scope="last",
        metric=EVAL,  # the first objective's, as a spec may repeat it
        mode="max",
    )
    trials = {}
    for k, (lr, epochs, hidden) in enumerate(
        [(1e-3, 2, [32]), (3e-3, 6, [64, 64]), (1e-4, 6, [32])]
    ):
        final = 100.0 + 50 * k
        points = [(i, 10_000 * i, {"time_total_s": 4.0 * i + k}) for i in (1, 2, 3)]
        points[-1][2][EVAL] = final  # the at-end evaluation: the last iteration only
        trials[f"{name}_{k:05d}"] = (
            {
                "status": "TERMINATED",
                "config": {"lr": lr, "num_epochs": epochs, "model.fcnet_hiddens": hidden},
                "iterations": 3,
                "env_steps": 30_000,
                "metric": final,
                "best_metric": final,
                "score": final,
                "values": {EVAL: final, "time_total_s": 12.0 + k},
            },
            points,
        )
    confirmed = [
        {
            "trial_id": f"{name}_00002",
            "config": {"lr": 1e-4},
            "seeds": [10, 11],
            "scores": [190.0, 210.0],
            "mean": 200.0,
            "ci95": [190.0, 210.0],
            "iqm": 200.0,
        }
    ]
    exp_id = _stored(store, name, spec, "SUCCEEDED", trials, confirmation=confirmed)
    store.close()
    return exp_id


def test_learning_curves_draw_what_ran(server, browser):
    """Each objective has its own learning curves; the evaluation's one point per trial
    (the at-end evaluation) is drawn as a marker, never an empty chart."""
    exp_id = _drawn_sweep(server, "curves")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server.url}/#/experiments/{exp_id}")
    page.wait_for_selector("#curves .plot-container", timeout=60_000)
    curves = page.evaluate(
        """() => { const el = document.querySelector('#curves');
            return { traces: el.data.map((t) => [t.yaxis, t.x.length, t.mode]),
                     titles: [el.layout.yaxis.title.text, el.layout.yaxis2.title.text] }; }"""
    )
    # long names are broken into lines that fit the chart's height
    assert [t.replace("<br>", "").replace(" ", "") for t in curves["titles"]] == [
        f"{EVAL}(higherisbetter)",
        "time_total_s(trainingseconds,lowerisbetter)",
    ]
    assert all(len(line) <= 28 for t in curves["titles"] for line in t.split("<br>"))
    by_axis = {}
    for axis, n, mode in curves["traces"]:
        by_axis.setdefault(axis, []).append(n)
        assert "markers" in mode
    assert by_axis == {"y": [1, 1, 1], "y2": [3, 3, 3]}
    # every reported point is drawn: 3 evaluation points, 9 of time_total_s
    assert page.locator("#curves .scatterlayer .point").count() == 12
    # the x axis starts at 0 steps, not around the lone points (30.1k-30.15k)
    assert page.evaluate("() => document.querySelector('#curves')._fullLayout.xaxis.range[0]") <= 0
    assert page.locator("#curves-note").is_hidden()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sweep-curves.png"), full_page=True)
    assert not errors, errors


def test_the_pages_charts_say_what_they_show(server, browser):
    """`choice` keys are categorical axes with the choices as ticks (of the spec's space,
    or of the algorithm's default space); the Pareto chart says what time_total_s is and
    which way is better, and shows a note, not empty axes, before any trial has both
    values; the confirmation chart's y title fits beside its ticks."""
    from tuner.store import Store

    exp_id = _drawn_sweep(server, "details")
    store = Store(f"sqlite:///{server.data_dir / 'tuner.db'}")
    default_space = _stored(  # PPO's default space: gamma is a choice of five
        store,
        "default-space",
        {k: v for k, v in tiny("default-space").items() if k != "search"},
        "STOPPED",
        {
            f"default-space_{k:05d}": (
                {"status": "TERMINATED", "config": {"gamma": g}, "best_metric": 10.0 * k},
                [],
            )
            for k, g in enumerate([0.99, 0.995])
        },
    )
    objectives = [
        {"metric": "env_runners/episode_return_mean", "mode": "max"},
        {"metric": "time_total_s", "mode": "min"},
    ]
    search = {"method": "optuna", "num_samples": 2, "space": {"lr": {"loguniform": [1e-4, 1e-2]}}}
    no_values = _stored(
        store,
        "no-values-yet",
        tiny("no-values-yet", objectives=objectives, search=search),
        "STOPPED",
        {"no-values-yet_00000": ({"status": "PAUSED", "config": {"lr": 1e-3}}, [])},
    )
    store.close()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server.url}/#/experiments/{exp_id}")
    dims_js = """() => Object.fromEntries(document.querySelector('#parcoords').data[0]
        .dimensions.map((d) => [d.label, [d.tickvals || null, d.ticktext || null, d.values]]))"""
    page.wait_for_selector("#parcoords .plot-container", timeout=60_000)
    dims = page.evaluate(dims_js)
    assert dims["num_epochs"] == [[0, 1, 2], ["2", "6", "12"], [0, 1, 1]]
    assert dims["model.fcnet_hiddens"] == [[0, 1], ["[32]", "[64,64]"], [0, 1, 0]]
    assert "lr (log)" in dims

    page.wait_for_selector("#pareto-chart .plot-container", timeout=30_000)
    x_title = page.evaluate("() => document.querySelector('#pareto-chart').layout.xaxis.title.text")
    y_title = page.evaluate("() => document.querySelector('#pareto-chart').layout.yaxis.title.text")
    assert x_title == f"{EVAL} (higher is better)"
    assert y_title.replace("<br>", " ") == "time_total_s (training seconds, lower is better)"

    # the confirmation chart's y title (a long metric's) lies inside the chart, whole
    page.wait_for_selector("#confirm-chart .g-ytitle text", timeout=30_000)
    assert "episode_return_mean" in page.locator("#confirm-chart .g-ytitle").text_content()
    title = page.locator("#confirm-chart .g-ytitle text").bounding_box()
    chart = page.locator("#confirm-chart .main-svg").first.bounding_box()
    ticks = page.locator("#confirm-chart .ytick text").first.bounding_box()
    assert title["x"] >= chart["x"]
    assert title["y"] >= chart["y"] - 1
    assert title["y"] + title["height"] <= chart["y"] + chart["height"] + 1
    assert title["x"] + title["width"] <= ticks["x"]  # beside its tick labels, not over
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sweep-details.png"), full_page=True)

    page.goto(f"{server.url}/#/experiments/{default_space}")
    page.wait_for_function(
        "() => document.querySelector('#experiment-title').textContent === 'default-space'"
    )
    page.wait_for_selector("#parcoords .plot-container", timeout=30_000)
    gamma = page.evaluate(dims_js)["gamma"]
    assert gamma == [[0, 1, 2, 3, 4], ["0.95", "0.98", "0.99", "0.995", "0.999"], [2, 3]]

    page.goto(f"{server.url}/#/experiments/{no_values}")
    page.wait_for_selector("#pareto-panel:not([hidden]) #pareto-note:not([hidden])", timeout=30_000)
    assert "appears once a trial has reported both" in page.locator("#pareto-note").inner_text()
    assert page.locator("#pareto-chart .plot-container").count() == 0  # no empty axes
    assert not errors, errors


def test_the_page_shows_errors_as_what_they_are(server, browser):
    """A sweep that succeeded after a resume shows the earlier attempt's end as history,
    not as its error; a failed sweep's error is red and starts at a line, and the trial it
    left pending says it did not finish; a trial retried after an error shows that error."""
    from tuner.store import Store

    store = Store(f"sqlite:///{server.data_dir / 'tuner.db'}")
    retried = (
        "Failure # 1 (occurred at 2026-01-01)\nTraceback (most recent call last):\n"
        "RuntimeError: the env crashed"
    )
    ok_id = _stored(
        store,
        "resumed-ok",
        tiny("resumed-ok"),
        "SUCCEEDED",
        {"resumed-ok_00000": ({"status": "TERMINATED", "retries": 1, "error": retried}, [])},
        error="driver ended (FAILED); resumed",
    )
    traceback = "\n".join(
        ["Traceback (most recent call last):"]
        + [f'  File "m{i}.py", line {i}, in f\n    g({i})' for i in range(400)]
        + ["RuntimeError: out of memory under resource contention"]
    )
    failed_id = _stored(
        store,
        "failed",
        tiny("failed"),
        "FAILED",
        {"failed_00000": ({"status": "PENDING"}, [])},
        error=traceback,
    )
    store.close()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    page.goto(f"{server.url}/#/experiments/{ok_id}")
    page.wait_for_selector("#experiment-error:not([hidden])", timeout=30_000)
    box = page.locator("#experiment-error")
    assert box.get_attribute("class") == "box history"
    assert box.inner_text().startswith("History (an earlier attempt): driver ended (FAILED)")
    page.wait_for_selector("#trials-table tbody tr[data-trial-id]")
    assert page.locator("td.col-retries").inner_text() == "1"
    cell = page.locator("td.col-error span")
    assert cell.inner_text() == "RuntimeError: the env crashed"
    assert cell.get_attribute("title") == retried

    page.goto(f"{server.url}/#/experiments/{failed_id}")
    page.wait_for_function(
        "() => document.querySelector('#experiment-title').textContent === 'failed'"
    )
    page.wait_for_selector("#experiment-error:not([hidden])", timeout=30_000)
    box = page.locator("#experiment-error")
    assert box.get_attribute("class") == "box error"
    lines = box.inner_text().split("\n")
    assert lines[0].startswith("[shortened:")
    assert lines[1] in traceback.split("\n")
    assert lines[-1] == "RuntimeError: out of memory under resource contention"
    # the trial it left pending says it did not finish, instead of looking queued
    page.wait_for_selector("#trials-table tbody tr[data-trial-id]")
    assert page.locator("td.col-status").inner_text() == "PAUSED"
    assert page.locator("td.col-error").inner_text().startswith("not finished: the sweep FAILED")

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sweep-errors.png"), full_page=True)
    assert not errors, errors


def test_the_examples_say_what_they_need(server, browser):
    """Examples that import code, or start from an earlier sweep, say so in the list and
    beside it once chosen; the others say nothing."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server.url}/#/new")
    page.wait_for_function("() => document.querySelectorAll('#example-select option').length > 5")
    label = page.locator("#example-select option[value='callbacks-cartpole']").inner_text()
    assert label == "callbacks-cartpole (needs TUNER_ALLOWED_MODULES=tuner_examples)"
    warm = page.locator("#example-select option[value='cartpole-ppo-warm-start']").inner_text()
    assert "needs an earlier sweep named cartpole-ppo-default-space" in warm
    page.select_option("#example-select", "reinforce-cartpole")
    needs = page.locator("#example-needs")
    assert needs.is_visible()
    assert "TUNER_ALLOWED_MODULES=tuner_examples make run" in needs.inner_text()
    page.select_option("#example-select", "cartpole-ppo")
    assert (
        page.locator("#example-select option[value='cartpole-ppo']").inner_text() == "cartpole-ppo"
    )
    assert needs.is_hidden()
