// tuner status page: a hash-routed single page over the REST API (/api/v1).
// Plain ES2020, no build step. `Plotly` is a global from static/vendor/plotly.min.js.
//
//   #/                      list of sweeps (?status=<status>&offset=50 in the hash)
//   #/experiments/<id>      one sweep: header, best trial, trials table, charts
//   #/compare?ids=A,B       2 to 4 sweeps side by side (read once, not polled)
//   #/new                   a new sweep from a spec
//
// Every 2 s while the tab is visible the current view is re-fetched and the DOM is
// patched in place: tables are rebuilt with one innerHTML assignment (skipped when
// the markup is unchanged), charts go through Plotly.react only when a cheap data
// signature changed, and clicks are handled by delegation on the table bodies.
//
// The page spells no status: a sweep's and a trial's statuses, and which of a sweep's
// are terminal, stoppable and resumable, come from the server (GET /statuses, defined
// once in tuner/statuses.py).
'use strict';

const API = 'api/v1';
const POLL_MS = 2000;
const PAGE_SIZE = 50;
const PARCOORDS_MIN_MS = 10000;
const TOKEN_KEY = 'tuner.token';
const PLOT_CONFIG = { responsive: true, displaylogo: false };

const $ = (sel) => document.querySelector(sel);

// ---------------------------------------------------------------- helpers

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Escape any value for use in HTML text or a quoted attribute. */
function esc(value) {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** Only http(s) and same-origin links from the API become hrefs (no javascript: URLs). */
function safeUrl(url) {
  return typeof url === 'string' && /^(https?:\/\/|\/)/i.test(url) ? url : null;
}

function fmtNum(v) {
  if (typeof v !== 'number') return v == null ? '' : String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return v.toLocaleString('en-US');
  if (Math.abs(v) >= 1000) return v.toFixed(1);
  return String(Number(v.toPrecision(4)));
}

/** Format a config value: numbers compactly, lists/objects as JSON. */
function fmtValue(v) {
  if (v == null) return '';
  if (typeof v === 'number') return fmtNum(v);
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function fmtTime(iso) {
  if (!iso) return '—';
  // Naive timestamps (no offset) are UTC on the server; say so before parsing.
  const d = new Date(/[zZ]|[+-]\d\d:?\d\d$/.test(iso) ? iso : `${iso}Z`);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

function badge(status) {
  const s = String(status ?? 'UNKNOWN');
  return `<span class="badge badge-${s.toLowerCase().replace(/[^a-z]/g, '')}">${esc(s)}</span>`;
}

function link(url, text) {
  const href = safeUrl(url);
  return href ? `<a href="${esc(href)}" target="_blank" rel="noopener">${esc(text)}</a>` : '';
}

/** An error's last line, where a traceback names the exception (and where the store's
 * "[shortened: ...]" note is not), cut to n characters. */
function lastLine(text, n) {
  const last = String(text).split('\n').filter((l) => l.trim()).pop() ?? '';
  return last.length > n ? `${last.slice(0, n - 1)}…` : last;
}

/** Natural order: "trial_2" before "trial_10". */
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });

// Last markup written per element, so unchanged tables are not re-parsed (which would
// also drop a text selection or hover state every 2 s).
const lastHtml = new WeakMap();
function setHtml(el, html) {
  if (lastHtml.get(el) === html) return;
  lastHtml.set(el, html);
  el.innerHTML = html;
}
function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}
function show(el, visible) {
  el.hidden = !visible;
}
const yieldToBrowser = () => new Promise((resolve) => setTimeout(resolve, 0));

// ---------------------------------------------------------------- API

class HttpError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

let memoryToken = ''; // used when localStorage is disabled
function getToken() {
  try { return localStorage.getItem(TOKEN_KEY) || memoryToken; } catch { return memoryToken; }
}

async function api(path, method = 'GET', send = null) {
  const headers = { Accept: 'application/json' };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers, cache: 'no-store' };
  if (send) {
    headers['Content-Type'] = send.type;
    init.body = send.body;
  }
  const res = await fetch(`${API}${path}`, init);
  if (res.status === 401) show($('#token-box'), true);
  let body = null;
  try { body = await res.json(); } catch { /* empty or non-JSON body */ }
  if (!res.ok) {
    const d = body && body.detail;
    const msg = typeof d === 'string' ? d : d ? JSON.stringify(d) : `HTTP ${res.status}`;
    const error = new HttpError(res.status, msg);
    error.problems = Array.isArray(d) ? d : null; // [{loc, msg, value}] for bad input
    throw error;
  }
  return body;
}

function describeError(err) {
  if (err instanceof HttpError) {
    if (err.status === 401) return 'The API needs a token: enter it in the box at the top right.';
    return `Request failed (${err.status}): ${err.message}`;
  }
  return `Cannot reach the tuner server (${err.message}). Retrying…`;
}

function setBanner(message) {
  const el = $('#error-banner');
  setText(el, message || '');
  show(el, Boolean(message));
}

// ---------------------------------------------------------------- statuses

// {sweep, trial: [...in lifecycle order], terminal, stoppable, resumable: Set}, once loaded
let vocab = null;
let vocabReq = null;

/** The status vocabulary, asked of the server once (again after a failed try); fills the
 * list's status filter. */
function loadStatuses() {
  vocabReq = vocabReq || api('/statuses').then((s) => {
    vocab = {
      sweep: s.sweep,
      trial: s.trial,
      terminal: new Set(s.terminal),
      stoppable: new Set(s.stoppable),
      resumable: new Set(s.resumable),
    };
    const options = s.sweep.map((x) => `<option value="${esc(x)}">${esc(x)}</option>`);
    setHtml($('#status-filter'), `<option value="">all</option>${options.join('')}`);
    if (state.route.view === 'list') $('#status-filter').value = state.route.status;
    return vocab;
  }).catch((err) => {
    vocabReq = null;
    throw err;
  });
  return vocabReq;
}

/** Whether a sweep's status is in one of the server's groups (terminal, stoppable, ...). */
function isIn(group, status) {
  return Boolean(vocab && vocab[group].has(status));
}

/** "4 · 1 running, 3 terminated": trials by status, in the order of a trial's statuses. */
function countsText(counts) {
  const c = counts || {};
  const order = vocab ? vocab.trial : [];
  const keys = [...order, ...Object.keys(c).filter((k) => !order.includes(k))]
    .filter((k) => Number(c[k]) > 0);
  const total = keys.reduce((n, k) => n + Number(c[k]), 0);
  return total ? `${total} · ${keys.map((k) => `${c[k]} ${k.toLowerCase()}`).join(', ')}` : '';
}

// ---------------------------------------------------------------- state & routing

const state = {
  route: { view: 'list', status: '', offset: 0 },
  gen: 0, // bumped on navigation: responses that arrive for an older view are dropped
  exp: null, // per-sweep state, see newSweepState()
  lastRefreshMs: 0,
  picked: new Set(), // sweep ids ticked for a comparison
};

function newSweepState(id) {
  return {
    id,
    data: null, // last Experiment
    trials: [],
    configKeys: [],
    sort: { key: null, dir: 1 },
    finalFetched: false, // terminal sweep whose trials/metrics were fetched once more
    curvesSig: '',
    parcoordsSig: '',
    parcoordsAt: 0, // performance.now() of the last parcoords draw
    importanceSig: null,
  };
}

function parseRoute() {
  const [path, query = ''] = location.hash.replace(/^#/, '').split('?');
  const m = path.match(/^\/experiments\/([^/]+)\/?$/);
  if (m) return { view: 'experiment', id: decodeURIComponent(m[1]) };
  if (path === '/new') return { view: 'new' };
  const q = new URLSearchParams(query);
  if (path === '/compare') {
    return { view: 'compare', ids: (q.get('ids') || '').split(',').filter(Boolean) };
  }
  const offset = Math.max(0, parseInt(q.get('offset'), 10) || 0);
  return { view: 'list', status: q.get('status') || '', offset };
}

function listHash(status, offset) {
  const q = new URLSearchParams();
  if (status) q.set('status', status);
  if (offset > 0) q.set('offset', String(offset));
  const s = q.toString();
  return s ? `#/?${s}` : '#/';
}

function onRoute() {
  const route = parseRoute();
  state.route = route;
  state.gen += 1;
  show($('#list-view'), route.view === 'list');
  show($('#experiment-view'), route.view === 'experiment');
  show($('#new-view'), route.view === 'new');
  show($('#compare-view'), route.view === 'compare');
  if (route.view === 'compare') {
    document.title = 'tuner · compare';
    loadComparison(route, state.gen);
    return; // a comparison is read once
  }
  if (route.view === 'new') {
    document.title = 'tuner · new sweep';
    loadExamples();
    return; // nothing to poll
  }
  if (route.view === 'list') {
    $('#status-filter').value = route.status;
    document.title = 'tuner · sweeps';
  } else if (!state.exp || state.exp.id !== route.id) {
    state.exp = newSweepState(route.id);
    clearSweepView();
  }
  refreshNow();
}

// ---------------------------------------------------------------- polling

let timer = 0;
let inflight = null;

/** Run one refresh of the current view; refreshes never overlap. */
async function refresh() {
  while (inflight) await inflight;
  inflight = doRefresh();
  try { await inflight; } finally { inflight = null; }
}

async function doRefresh() {
  const { gen, route } = state;
  if (route.view === 'new' || route.view === 'compare') return;
  const t0 = performance.now();
  try {
    await loadStatuses();
    if (route.view === 'list') await refreshList(route, gen);
    else await refreshSweep(route.id, gen);
    if (gen !== state.gen) return;
    setBanner('');
    setText($('#last-updated'), `Updated ${new Date().toLocaleTimeString()}`);
    state.lastRefreshMs = performance.now() - t0;
  } catch (err) {
    if (gen === state.gen) setBanner(describeError(err));
  }
}

function schedule() {
  clearTimeout(timer);
  // A hidden tab schedules nothing; the visibilitychange handler restarts the loop.
  if (document.visibilityState === 'visible') timer = setTimeout(tick, POLL_MS);
}

async function tick() {
  await refresh();
  schedule();
}

function refreshNow() {
  clearTimeout(timer);
  refresh().finally(schedule);
}

// ---------------------------------------------------------------- cluster

const CLUSTER_MS = 30_000;
const CLUSTER_RETRY_MS = 3_000;
let clusterTimer = 0;

/** "Ray: 2 nodes · 32 CPUs · 4 GPUs" in the top bar; each node in its tooltip. Asked
 * again every 30 s, or every 3 s while the cluster is starting or not answering. */
async function refreshCluster() {
  clearTimeout(clusterTimer);
  const el = $('#cluster-info');
  let next = CLUSTER_RETRY_MS;
  try {
    const c = await api('/cluster');
    el.title = '';
    if (!c.reachable) {
      setText(el, 'Ray: not reachable');
    } else if (!c.nodes.length) {
      setText(el, 'Ray: starting');
    } else {
      const n = c.nodes.length;
      setText(el, `Ray: ${n} node${n === 1 ? '' : 's'} · ${c.cpus} CPUs · ${c.gpus} GPUs`);
      el.title = c.nodes
        .map((x) => `${x.node_ip || x.node_id}${x.is_head ? ' (head)' : ''}: ${x.cpus} CPUs, ${x.gpus} GPUs`)
        .join('\n');
      next = CLUSTER_MS;
    }
  } catch {
    setText(el, 'Ray: ?'); // the view's own refresh explains API errors
    el.title = '';
  }
  clusterTimer = setTimeout(refreshCluster, next);
}

// ---------------------------------------------------------------- list view

async function refreshList(route, gen) {
  const q = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(route.offset) });
  if (route.status) q.set('status', route.status);
  const page = await api(`/experiments?${q}`);
  if (gen === state.gen) renderList(page, route);
}

/** The answer's number in the list: its confirmed mean where a confirmation decided it
 * (as the headline box shows it), else its score. */
function headline(best) {
  if (!best) return '—';
  const mean = best.source === 'confirm' && best.confirmed ? best.confirmed.mean : null;
  return typeof mean === 'number' ? `${fmtNum(mean)} (confirmed mean)` : `${fmtNum(best.metric_value)} (score)`;
}

function renderList(page, route) {
  const items = page.items || [];
  const rows = items.map((e) => `
    <tr data-id="${esc(e.id)}">
      <td><input type="checkbox" class="pick" value="${esc(e.id)}" aria-label="compare ${esc(e.name || e.id)}"${
        state.picked.has(e.id) ? ' checked' : ''}></td>
      <td><a href="#/experiments/${esc(encodeURIComponent(e.id))}">${esc(e.name || e.id)}</a></td>
      <td>${badge(e.status)}</td>
      <td>${esc(e.algorithm)}</td>
      <td>${esc(e.env)}</td>
      <td>${esc(countsText(e.trial_counts) || '—')}</td>
      <td class="num">${esc(headline(e.best))}</td>
      <td>${esc(fmtTime(e.created_at))}</td>
    </tr>`);
  const empty = `<tr><td colspan="8" class="empty">No sweeps${
    route.status ? ` with status ${esc(route.status)}` : ''}.</td></tr>`;
  setHtml($('#experiments-table tbody'), rows.length ? rows.join('') : empty);

  const total = page.total ?? items.length;
  const from = items.length ? route.offset + 1 : 0;
  setText($('#page-info'), `${from}–${route.offset + items.length} of ${total}`);
  $('#prev-page').disabled = route.offset <= 0;
  $('#next-page').disabled = route.offset + PAGE_SIZE >= total;
}

// ---------------------------------------------------------------- compare view

const COMPARE_MOST = 4;

/** Sweeps side by side (GET /compare): a column per sweep, a row per best-config key
 * (marked where the values differ), and each best trial's curve on one chart. */
async function loadComparison(route, gen) {
  setHtml($('#compare-table thead'), '');
  setHtml($('#compare-table tbody'), '');
  try {
    const q = new URLSearchParams({ ids: route.ids.join(',') });
    const cmp = await api(`/compare?${q}`);
    if (gen !== state.gen) return;
    setBanner('');
    renderComparison(cmp);
  } catch (err) {
    if (gen === state.gen) setBanner(describeError(err));
  }
}

function renderComparison(cmp) {
  const sweeps = cmp.sweeps;
  const differ = new Set(cmp.differing_keys);
  const cell = (v) => `<td>${esc(v)}</td>`;
  const ci = (c) => (c && c.mean != null
    ? `${fmtNum(c.mean)}${c.ci95 ? ` [${fmtNum(c.ci95[0])}, ${fmtNum(c.ci95[1])}]` : ''}` : '—');
  setHtml($('#compare-table thead'), `<tr><th></th>${sweeps.map((s) =>
    `<th><a href="#/experiments/${esc(encodeURIComponent(s.id))}">${esc(s.name)}</a></th>`).join('')}</tr>`);
  const rows = [
    `<tr><th>Status</th>${sweeps.map((s) => `<td>${badge(s.status)}</td>`).join('')}</tr>`,
    `<tr><th>Score</th>${sweeps.map((s) => cell(s.best
      ? `${fmtNum(s.best.metric_value)} (${s.scope} of ${s.metric})` : '—')).join('')}</tr>`,
    `<tr><th>Confirmed mean [95 % CI]</th>${sweeps.map((s) => cell(ci(s.confirmed))).join('')}</tr>`,
    ...cmp.keys.map((k) => `<tr class="${differ.has(k) ? 'differs' : ''}"><th>${esc(k)}${
      differ.has(k) ? ' <span class="mark" title="differs">≠</span>' : ''}</th>${sweeps.map((s) =>
      cell(s.best && k in s.best.config ? fmtValue(s.best.config[k]) : '—')).join('')}</tr>`),
    `<tr><th>Importance</th>${sweeps.map((s) => cell(Object.entries(s.importance || {})
      .slice(0, 3).map(([k, v]) => `${k} ${fmtNum(v)}`).join(', ') || '—')).join('')}</tr>`,
    `<tr><th>MLflow</th>${sweeps.map((s) => `<td>${link(s.mlflow && s.mlflow.url, 'run ↗') || '—'}</td>`).join('')}</tr>`,
  ];
  setHtml($('#compare-table tbody'), rows.join(''));
  if (!window.Plotly) return chartNote('compare-chart', 'Charts unavailable: plotly.min.js did not load.');
  const traces = sweeps.filter((s) => s.curve.length).map((s) => ({
    type: 'scatter',
    mode: 'lines+markers',
    name: s.name,
    x: s.curve.map((p) => p.env_steps),
    y: s.curve.map((p) => p.value),
  }));
  chartNote('compare-chart', traces.length ? '' : 'No best trial has reported its metric yet.');
  Plotly.react($('#compare-chart'), traces, {
    height: 320,
    margin: { l: 60, r: 20, t: 10, b: 50 },
    xaxis: { title: { text: 'env steps' } },
    yaxis: { title: { text: (sweeps[0] && sweeps[0].metric) || 'metric' } },
  }, PLOT_CONFIG);
}

// ---------------------------------------------------------------- sweep view

async function refreshSweep(id, gen) {
  const s = state.exp;
  const enc = encodeURIComponent(id);
  const exp = await api(`/experiments/${enc}`);
  if (gen !== state.gen) return;
  s.data = exp;
  renderHeader(exp);
  renderBest();
  renderConfirmation(exp);
  renderImportance(exp);

  // Once the sweep is terminal, trials and metrics are fetched one last time and then
  // left alone; the experiment itself is still polled, so a resume restarts them.
  const terminal = isIn('terminal', exp.status);
  if (!terminal) s.finalFetched = false;
  if (s.finalFetched) return;

  // one curve chart per objective (the metric alone without `objectives`)
  const metricsReq = Promise.all(objectivesOf(exp).map((o) =>
    api(`/experiments/${enc}/metrics?key=${encodeURIComponent(o.metric)}`)
      .then((m) => ({ ...o, series: m.series || {} }))))
    .catch((err) => ({ error: err })); // no curves must not hide the trials table
  const [trials, metrics] = await Promise.all([
    api(`/experiments/${enc}/trials`), metricsReq, loadSpaces(exp)]);
  if (gen !== state.gen) return;
  s.trials = trials.items || [];
  const keys = new Set();
  for (const t of s.trials) for (const k of Object.keys(t.config || {})) keys.add(k);
  s.configKeys = [...keys];

  renderTrials();
  renderBest(); // the best trial's MLflow link comes from the trials list
  renderPareto(exp);
  // Each chart redraw is its own task, so the browser can paint the table and handle
  // clicks in between instead of freezing for the whole refresh.
  await yieldToBrowser();
  if (gen !== state.gen) return;
  renderCurves(metrics);
  await yieldToBrowser();
  if (gen !== state.gen) return;
  renderParcoords(terminal);
  if (terminal) s.finalFetched = true;
}

function clearSweepView() {
  setText($('#experiment-title'), 'Loading…');
  for (const sel of ['#experiment-status', '#experiment-meta', '#trials-table thead',
    '#trials-table tbody']) setHtml($(sel), '');
  for (const sel of ['#experiment-warnings', '#experiment-error', '#action-message',
    '#best-details', '#curves-note', '#parcoords-note', '#importance-note', '#mlflow-link',
    '#pareto-panel', '#pareto-note',
  ]) show($(sel), false);
  setText($('#trial-summary'), '');
  $('#stop-button').disabled = true;
  $('#resume-button').disabled = true;
  if (window.Plotly) {
    for (const sel of ['#curves', '#parcoords', '#confirm-chart', '#importance', '#pareto-chart']) {
      Plotly.purge($(sel));
    }
  }
  state.exp.confirmSig = null;
}

function renderHeader(exp) {
  const name = exp.name || exp.id;
  setText($('#experiment-title'), name);
  document.title = `tuner · ${name}`;
  setHtml($('#experiment-status'), badge(exp.status));
  const times = [['created', exp.created_at], ['started', exp.started_at],
    ['finished', exp.finished_at]].filter(([, t]) => t)
    .map(([label, t]) => `${label} <b>${esc(fmtTime(t))}</b>`);
  const objectives = (exp.spec && exp.spec.objectives) || [{ metric: exp.metric, mode: exp.mode }];
  const parts = [
    `<b>${esc(exp.algorithm)}</b> on <b>${esc(exp.env)}</b>`,
    objectives.map((o) => `${esc(o.mode)} <code>${esc(o.metric)}</code>`).join(', '),
    ...times,
  ];
  if (exp.attempts > 1) parts.push(`attempt ${esc(exp.attempts)}`);
  if (exp.scheduler && exp.scheduler.type && exp.scheduler.type !== 'fifo') {
    parts.push(`<span id="experiment-scheduler">${esc(schedulerLine(exp.scheduler))}</span>`);
  }
  setHtml($('#experiment-meta'), parts.join('<span class="sep">·</span>'));

  const warnings = exp.warnings || [];
  setHtml($('#experiment-warnings'), warnings.map((w) => `<div>${esc(w)}</div>`).join(''));
  show($('#experiment-warnings'), warnings.length > 0);
  // An error is the sweep's own where it ended on it (it can be resumed); while it runs
  // again, or once it succeeded, an error left from an earlier attempt is history.
  const own = isIn('terminal', exp.status) && isIn('resumable', exp.status);
  const errorBox = $('#experiment-error');
  const errorClass = own ? 'box error' : 'box history';
  if (errorBox.className !== errorClass) errorBox.className = errorClass;
  setText(errorBox, exp.error ? `${own ? '' : 'History (an earlier attempt): '}${exp.error}` : '');
  show(errorBox, Boolean(exp.error));

  $('#stop-button').disabled = !isIn('stoppable', exp.status);
  $('#resume-button').disabled = !isIn('resumable', exp.status);
  const mlflowUrl = safeUrl(exp.mlflow && exp.mlflow.url);
  if (mlflowUrl && $('#mlflow-link').getAttribute('href') !== mlflowUrl) {
    $('#mlflow-link').setAttribute('href', mlflowUrl);
  }
  show($('#mlflow-link'), Boolean(mlflowUrl));
}

/** A scheduler's settings in force (ExperimentView.scheduler, Plan.scheduler) on one
 * line: the unit it counts, its settings and ASHA's rungs (hyperband: each bracket's
 * trials and rungs), as the CLI prints them. */
function schedulerLine(sched) {
  const num = (v) => (typeof v === 'number' && Number.isInteger(v) ? v.toLocaleString('en-US') : String(v));
  const skip = new Set(['type', 'time_attr', 'rungs', 'derived', 'brackets']);
  const parts = Object.entries(sched).filter(([k]) => !skip.has(k)).map(([k, v]) => `${k} ${num(v)}`);
  let line = `${sched.type} counting ${sched.time_attr || ''}: ${parts.join(', ')}`;
  if ((sched.brackets || []).length) {
    line += sched.brackets.map((b, i) => `; bracket ${i + 1}: ${b.trials} trials, rungs at ${b.rungs.map(num).join(', ')}`).join('');
  } else if ((sched.rungs || []).length) line += `; rungs at ${sched.rungs.map(num).join(', ')}`;
  if ((sched.derived || []).length) line += ` (from the budget: ${sched.derived.join(', ')})`;
  return line;
}

function renderBest() {
  const s = state.exp;
  const best = s.data && s.data.best;
  // a sweep that runs, or that a resume may continue (stopped, failed, partial), has a
  // best so far; one that ended for good, its best
  const ended = Boolean(s.data) && isIn('terminal', s.data.status) && !isIn('resumable', s.data.status);
  const confirmed = best && best.source === 'confirm' && best.confirmed;
  const raced = best && best.race;
  setText($('#best-title'), !ended ? 'Best so far'
    : confirmed ? 'Best config (confirmed)' : raced ? 'Best config (raced)' : 'Best trial');
  show($('#best-empty'), !best);
  show($('#best-details'), Boolean(best));
  if (!best) return;
  setText($('#best-source'), confirmed
    ? `The config with the best mean over ${confirmed.seeds.length} fresh seeds (the confirmation below); its model is the median seed's checkpoint.`
    : raced ? `The config with the best mean over its ${raced.seeds.length} seeds in the search (search.race)${
      s.data.spec && s.data.spec.confirm ? '; the confirmation on fresh seeds has not finished' : ', not confirmed on fresh seeds'}; its model is the median seed's checkpoint.`
    : (s.data.spec && s.data.spec.confirm
      ? 'The search\'s best trial: the confirmation on fresh seeds has not finished.'
      : 'The search\'s best trial, not confirmed on fresh seeds (the spec\'s confirm re-runs the top configs).'));
  setText($('#best-trial-id'), String(best.trial_id ?? ''));
  const ci = confirmed && confirmed.ci95 ? `, 95 % CI [${fmtNum(confirmed.ci95[0])}, ${fmtNum(confirmed.ci95[1])}]` : '';
  setText($('#best-confirmed'), confirmed
    ? `mean ${fmtNum(confirmed.mean)}${ci}, IQM ${fmtNum(confirmed.iqm)} over seeds ${(confirmed.seeds || []).join(', ')}` : '');
  show($('#best-confirmed-label'), Boolean(confirmed));
  show($('#best-confirmed'), Boolean(confirmed));
  // search.race: its config's seeds in the search; its score is their mean
  const race = best.race;
  setText($('#best-race'), race
    ? `mean ${fmtNum(race.mean)} over seeds ${race.seeds.join(', ')} (scores ${race.scores.map(fmtNum).join(', ')})` : '');
  show($('#best-race-label'), Boolean(race));
  show($('#best-race'), Boolean(race));
  setText($('#best-metric'), `${fmtNum(best.metric_value)} (${race ? `mean over ${race.seeds.length} seeds, ` : ''}${best.scope || ''})`);
  setText($('#best-model'), best.model_version
    ? `${best.model_version} (trial ${best.checkpoint_trial_id || best.trial_id}, seed ${best.seed})` : '—');
  setText($('#best-checkpoint'), best.checkpoint || '—');
  const search = best.search_best;
  setText($('#search-best'), search
    ? `trial ${search.trial_id}, score ${fmtNum(search.metric_value)} (${search.scope})${
      JSON.stringify(search.config) === JSON.stringify(best.config) ? ', the same config' : `: ${JSON.stringify(search.config)}`}` : '');
  show($('#search-best-label'), Boolean(search));
  show($('#search-best'), Boolean(search));
  // resources a performance default set for it (num_envs_per_env_runner), to rerun it as it ran
  const resources = Object.entries(best.resources || {});
  setText($('#best-resources'), resources.map(([k, v]) => `${k}: ${v}`).join(', '));
  show($('#best-resources-label'), resources.length > 0);
  show($('#best-resources'), resources.length > 0);
  // Written only when changed, so a selection inside the <pre> survives polling.
  setText($('#best-config'), JSON.stringify(best.config ?? {}, null, 2));
  const trial = s.trials.find((t) => t.trial_id === best.trial_id);
  const url = safeUrl(trial && trial.mlflow_url);
  if (url) $('#best-mlflow').setAttribute('href', url);
  show($('#best-mlflow'), Boolean(url));
}

/** The confirmation stage: each confirmed config's scores over fresh seeds, with the
 * mean and its 95 % bootstrap interval drawn as error bars. */
function renderConfirmation(exp) {
  const rows = exp.confirmation || [];
  show($('#confirm-panel'), rows.length > 0);
  const sig = JSON.stringify(rows);
  if (!rows.length || sig === state.exp.confirmSig) return;
  state.exp.confirmSig = sig;
  const ci = (c) => (c.ci95 ? `[${fmtNum(c.ci95[0])}, ${fmtNum(c.ci95[1])}]` : '—');
  setHtml($('#confirm-table tbody'), rows.map((c) => `<tr>
      <td>${esc(c.trial_id)}</td>
      <td><code>${esc(JSON.stringify(c.config))}</code></td>
      <td>${esc((c.seeds || []).join(', '))}</td>
      <td>${esc((c.scores || []).map(fmtNum).join(', '))}</td>
      <td class="num">${esc(fmtNum(c.mean))}</td>
      <td class="num">${esc(fmtNum(c.std))}</td>
      <td>${esc(ci(c))}</td>
      <td class="num">${esc(fmtNum(c.iqm))}</td>
    </tr>`).join(''));
  if (!window.Plotly) return;
  const withMean = rows.filter((c) => typeof c.mean === 'number');
  const trace = {
    type: 'scatter',
    mode: 'markers',
    x: withMean.map((c) => String(c.trial_id)),
    y: withMean.map((c) => c.mean),
    error_y: {
      type: 'data',
      symmetric: false,
      array: withMean.map((c) => (c.ci95 ? c.ci95[1] - c.mean : 0)),
      arrayminus: withMean.map((c) => (c.ci95 ? c.mean - c.ci95[0] : 0)),
    },
    marker: { size: 10 },
    hovertemplate: '%{x}<br>mean %{y:.4g}<extra></extra>',
  };
  const layout = {
    height: 300,
    margin: { l: 60, r: 20, t: 10, b: 60 },
    xaxis: { title: { text: 'config (search trial)' }, type: 'category', automargin: true },
    // a long metric name: the margin grows to hold the title and the tick labels
    yaxis: {
      title: { text: wrapTitle(`${exp.metric || 'score'}: mean, 95 % CI`, 28), standoff: 8 },
      zeroline: false,
      automargin: true,
    },
    uirevision: exp.id,
  };
  Plotly.react($('#confirm-chart'), [trace], layout, PLOT_CONFIG);
}

/** Several objectives (`spec.objectives`): every search trial's values of the first two
 * as a scatter, the Pareto front (`exp.pareto`) highlighted and joined, and a table of
 * the front's members with each objective's value, their confirmed means and config. */
function renderPareto(exp) {
  const objectives = (exp.spec && exp.spec.objectives) || [];
  const front = exp.pareto || [];
  show($('#pareto-panel'), objectives.length > 1);
  if (objectives.length < 2) return;
  const metrics = objectives.map((o) => o.metric);
  const trials = (state.exp.trials || []).filter((t) => t.stage === 'search' && t.values);
  const runs = Object.fromEntries((state.exp.trials || []).map((t) => [t.trial_id, t.mlflow_url]));
  const onFront = new Set(front.map((m) => m.trial_id));
  setHtml($('#pareto-table thead'), `<tr><th>Trial</th>${metrics.map((m, i) =>
    `<th class="num">${esc(metricLabel(m, objectives[i].mode))}</th>`).join('')}
    <th>Confirmed means</th><th>Hyperparameters</th><th>MLflow</th></tr>`);
  setHtml($('#pareto-table tbody'), front.map((m) => {
    const confirmed = (m.confirmed && m.confirmed.values) || null;
    return `<tr data-trial="${esc(m.trial_id)}"><td>${esc(m.trial_id)}</td>
      ${metrics.map((k) => `<td class="num">${esc(fmtNum(m.values[k]))}</td>`).join('')}
      <td>${confirmed ? esc(metrics.map((k) => fmtNum(confirmed[k])).join(', ')) : '—'}</td>
      <td><code>${esc(JSON.stringify(m.config))}</code></td>
      <td>${runs[m.trial_id] ? link(runs[m.trial_id], 'run') : '—'}</td></tr>`;
  }).join(''));
  const missing = trials.filter((t) => metrics.some((k) => typeof t.values[k] !== 'number'));
  const notes = [];
  if (!front.length) {
    notes.push(isIn('terminal', exp.status) ? 'No trial has a value of every objective.'
      : 'The front appears when the sweep ends.');
  }
  if (metrics.length > 2) notes.push(`The chart shows the first two of ${metrics.length} objectives.`);
  if (missing.length) notes.push(`${missing.length} trial(s) lack an objective's value and are not ranked.`);
  const [x, y] = metrics;
  const points = trials.filter((t) => typeof t.values[x] === 'number' && typeof t.values[y] === 'number');
  if (!points.length) { // no empty axes: a note until a trial has both values
    notes.unshift(`The chart appears once a trial has reported both ${x} and ${y}.`);
    chartNote('pareto', notes.join(' '));
    if (window.Plotly) Plotly.purge($('#pareto-chart'));
    return;
  }
  chartNote('pareto', notes.join(' '));
  if (!window.Plotly) return;
  const trace = (rows, name, marker, mode) => ({
    type: 'scatter',
    mode,
    name,
    x: rows.map((t) => t.values[x]),
    y: rows.map((t) => t.values[y]),
    text: rows.map((t) => `${t.trial_id}<br>${JSON.stringify(t.config)}`),
    marker,
    hovertemplate: `%{text}<br>${x} %{x:.4g}<br>${y} %{y:.4g}<extra></extra>`,
  });
  const others = points.filter((t) => !onFront.has(t.trial_id));
  const members = points.filter((t) => onFront.has(t.trial_id)).sort((a, b) => a.values[x] - b.values[x]);
  const layout = {
    height: 340,
    margin: { l: 70, r: 20, t: 10, b: 50 },
    xaxis: { title: { text: metricLabel(x, objectives[0].mode) }, zeroline: false, automargin: true },
    yaxis: { title: { text: wrapTitle(metricLabel(y, objectives[1].mode), 32) }, zeroline: false, automargin: true },
    legend: { orientation: 'h', x: 0, y: 1.02, yanchor: 'bottom' },
    uirevision: exp.id,
  };
  Plotly.react($('#pareto-chart'), [
    trace(others, 'other trials', { size: 8, color: '#8c959f' }, 'markers'),
    trace(members, 'Pareto front', { size: 11, color: '#cf222e', symbol: 'diamond' }, 'lines+markers'),
  ], layout, PLOT_CONFIG);
}

// ---------------------------------------------------------------- trials table

/** Column definitions; `get` gives the sort value, `html` the cell content. */
function trialColumns(configKeys) {
  const num = (key, label) => ({ key, label, num: true, get: (t) => t[key] });
  return [
    { key: 'trial_id', label: 'Trial', get: (t) => t.trial_id },
    { key: 'status', label: 'Status', get: (t) => t.status, html: (t) => badge(t.status) },
    num('iterations', 'Iter'),
    num('env_steps', 'Env steps'),
    { key: 'stage', label: 'Stage', get: (t) => t.stage },
    // a raced search's seeds of one config share its values: the seed tells them apart
    num('seed', 'Seed'),
    // one name per number, as the CLI, the JSON and MLflow: the score (the ranking value:
    // the final deterministic evaluation, else the metric under scope), the peak, the last
    num('score', 'Score'),
    num('best_metric', 'Peak'),
    num('metric', 'Last'),
    num('retries', 'Retries'),
    ...configKeys.map((k) => ({
      key: `config.${k}`, label: k, cls: 'col-config',
      get: (t) => (t.config || {})[k],
      html: (t) => esc(fmtValue((t.config || {})[k])),
    })),
    { key: 'node_ip', label: 'Node', get: (t) => t.node_ip },
    { key: 'device', label: 'Device', get: (t) => t.device },
    // the CPU and torch's kernel level: a seed trains the same numbers only where it matches
    {
      key: 'cpu', label: 'CPU', get: (t) => t.cpu,
      html: (t) => (t.cpu ? `<span title="${esc(t.cpu)}">${esc(t.cpu)}</span>` : ''),
    },
    {
      key: 'error', label: 'Error', get: (t) => t.error,
      html: (t) => (t.error ? `<span title="${esc(t.error)}">${esc(lastLine(t.error, 80))}</span>` : ''),
    },
    { key: 'mlflow_url', label: 'MLflow', get: (t) => t.mlflow_url, html: (t) => link(t.mlflow_url, 'run ↗') },
  ];
}

/** Numeric-aware comparison; blanks always sort last, whatever the direction. */
function sortRows(rows, col, dir) {
  const blank = (v) => v == null || v === '' || (typeof v === 'number' && Number.isNaN(v));
  const text = (v) => (typeof v === 'object' ? JSON.stringify(v) : String(v));
  return rows.slice().sort((x, y) => {
    const a = col.get(x);
    const b = col.get(y);
    if (blank(a) || blank(b)) return blank(a) - blank(b);
    const c = typeof a === 'number' && typeof b === 'number' ? a - b : collator.compare(text(a), text(b));
    return dir * c;
  });
}

function renderTrials() {
  const s = state.exp;
  const cols = trialColumns(s.configKeys);
  const sortCol = cols.find((c) => c.key === s.sort.key);
  const rows = sortCol ? sortRows(s.trials, sortCol, s.sort.dir) : s.trials;
  const bestId = s.data && s.data.best ? s.data.best.trial_id : null;
  // Cell classes: col-<key> (e.g. col-iterations, col-status); config columns also col-config.
  const cellClass = (c) => `col-${c.key.replace(/[^A-Za-z0-9_-]/g, '-')}${c.num ? ' num' : ''}${
    c.cls ? ` ${c.cls}` : ''}`;

  setHtml($('#trials-table thead'), `<tr>${cols.map((c) => {
    const arrow = c === sortCol ? (s.sort.dir > 0 ? ' ▲' : ' ▼') : '';
    return `<th data-key="${esc(c.key)}" class="${cellClass(c)}" title="Sort by ${esc(c.label)}">${
      esc(c.label)}${arrow}</th>`;
  }).join('')}</tr>`);

  const body = rows.map((t) => `<tr data-trial-id="${esc(t.trial_id)}"${
    t.trial_id === bestId ? ' class="is-best"' : ''}>${cols.map((c) => `<td class="${cellClass(c)}">${
    c.html ? c.html(t) : esc(c.num ? fmtNum(c.get(t)) : fmtValue(c.get(t)))}</td>`).join('')}</tr>`);
  setHtml($('#trials-table tbody'), body.length ? body.join('')
    : `<tr><td colspan="${cols.length}" class="empty">No trials yet.</td></tr>`);

  const counts = {};
  for (const t of s.trials) counts[t.status] = (counts[t.status] || 0) + 1;
  setText($('#trial-summary'), countsText(counts));
}

// ---------------------------------------------------------------- charts

function chartNote(id, message) {
  setText($(`#${id}-note`), message || '');
  show($(`#${id}-note`), Boolean(message));
}

// Plotly's default colours: a trial keeps its colour on every objective's chart
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
  '#7f7f7f', '#bcbd22', '#17becf'];
// up to this many points a curve also marks each one: a metric reported on a few
// iterations only (evaluation/... exists where a trial evaluated, the at-end evaluation
// once) draws points, never an empty chart
const MARKERS_UP_TO = 60;

/** The sweep's objectives: `spec.objectives`, else its one metric and mode. */
function objectivesOf(exp) {
  const listed = (exp.spec && exp.spec.objectives) || [];
  if (listed.length) return listed.map((o) => ({ metric: o.metric, mode: o.mode }));
  return exp.metric ? [{ metric: exp.metric, mode: exp.mode }] : [];
}

/** A metric named for an axis or a column: what it is where its name hides it (seconds),
 * and which way is better (`max`/`min` beside `time_total_s` reads as minutes). */
function metricLabel(metric, mode) {
  const unit = /(^|\/)time_total_s$/.test(metric) ? 'training seconds'
    : /_s$/.test(metric) ? 'seconds' : '';
  const way = mode === 'min' ? 'lower is better' : mode === 'max' ? 'higher is better' : '';
  const notes = [unit, way].filter(Boolean).join(', ');
  return notes ? `${metric} (${notes})` : metric;
}

/** A vertical axis title in lines of at most `most` characters, broken after a '/' or a
 * space (Plotly's <br>): a long metric name would run past its chart's height, clipped. */
function wrapTitle(text, most) {
  const lines = [];
  for (const part of String(text).split(/(?<=[/ ])/)) {
    const last = lines.length - 1;
    if (last >= 0 && (lines[last] + part).trimEnd().length <= most) lines[last] += part;
    else lines.push(part);
  }
  return lines.map((l) => l.trimEnd()).join('<br>');
}

/** Learning curves: per objective a chart (stacked), each trial a line through the points
 * it reported (markers where they are few), the best trial's drawn thicker. */
function renderCurves(metrics) {
  const s = state.exp;
  const el = $('#curves');
  if (!window.Plotly) return chartNote('curves', 'Charts unavailable: plotly.min.js did not load.');
  if (metrics.error) return chartNote('curves', `Learning curves unavailable: ${describeError(metrics.error)}`);
  const charts = metrics;
  const ids = [...new Set(charts.flatMap((c) => Object.keys(c.series)))].sort(collator.compare);
  const bestId = s.data.best ? String(s.data.best.trial_id) : null;
  // Cheap signature: the highlighted best trial, and per chart and trial the point count
  // and last point.
  let sig = `${bestId}|`;
  for (const c of charts) {
    sig += `${c.metric}#`;
    for (const id of ids) {
      const pts = c.series[id] || [];
      const last = pts[pts.length - 1] || [];
      sig += `${id}:${pts.length}:${last[0]}:${last[1]};`;
    }
  }
  if (sig === s.curvesSig) return;
  s.curvesSig = sig;
  const count = (c) => Object.values(c.series).reduce((n, pts) => n + pts.length, 0);
  if (!charts.some((c) => count(c) > 0)) {
    chartNote('curves', 'No metric values reported yet.');
    return Plotly.purge(el); // no empty axes box
  }
  const waiting = charts.filter((c) => !count(c)).map((c) => c.metric);
  chartNote('curves', waiting.length ? `No values of ${waiting.join(', ')} reported yet.` : '');

  const traces = [];
  const layout = {
    height: charts.length > 1 ? 60 + 280 * charts.length : 380,
    margin: { l: 70, r: 20, t: 10, b: 45 },
    showlegend: ids.length <= 20,
    hovermode: 'closest',
    uirevision: s.id, // keep the user's zoom across updates
  };
  if (charts.length > 1) layout.grid = { rows: charts.length, columns: 1, pattern: 'independent', ygap: 0.25 };
  charts.forEach((c, i) => {
    const n = i ? String(i + 1) : '';
    layout[`xaxis${n}`] = { title: { text: 'env steps' }, zeroline: false, rangemode: 'tozero' };
    layout[`yaxis${n}`] = {
      title: { text: wrapTitle(metricLabel(c.metric, charts.length > 1 ? c.mode : ''), charts.length > 1 ? 28 : 40) },
      zeroline: false,
      automargin: true,
    };
    ids.forEach((id, k) => {
      const pts = c.series[id] || [];
      const color = COLORS[k % COLORS.length];
      traces.push({
        type: 'scatter',
        mode: pts.length <= MARKERS_UP_TO ? 'lines+markers' : 'lines',
        connectgaps: true,
        name: id,
        legendgroup: id,
        showlegend: i === 0,
        xaxis: `x${n}`,
        yaxis: `y${n}`,
        x: pts.map((p) => p[0]),
        y: pts.map((p) => p[1]),
        line: { width: id === bestId ? 3 : 1.2, color },
        marker: { size: id === bestId ? 7 : 5, color },
        opacity: bestId && id !== bestId && ids.length > 10 ? 0.55 : 1,
        hovertemplate: `%{fullData.name}<br>steps %{x:,}<br>${c.metric} %{y:.4g}<extra></extra>`,
      });
    });
  });
  Plotly.react(el, traces, layout, PLOT_CONFIG);
}

/** A value as a categorical axis labels it. */
function categoryLabel(v) {
  if (v === undefined || v === null) return '—';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** A categorical dimension: `labels` in their order as the ticks (every choice of a
 * `choice` / `grid` domain, sampled or not), each trial at its label's index. */
function categorical(key, values, labels) {
  const index = new Map(labels.map((l, i) => [l, i]));
  return {
    label: key,
    values: values.map((v) => index.get(categoryLabel(v))),
    range: [0, Math.max(labels.length - 1, 1)],
    tickvals: labels.map((_, i) => i),
    ticktext: labels.map((l) => (l.length > 20 ? `${l.slice(0, 19)}…` : l)),
  };
}

/** One parcoords dimension from the trials' values of one sampled hyperparameter. */
function dimension(key, values, domain) {
  const choices = domain && typeof domain === 'object' ? domain.choice || domain.grid : null;
  if (Array.isArray(choices) && choices.length) { // a set of values, numbers too: its ticks
    const labels = choices.map(categoryLabel);
    for (const l of values.map(categoryLabel)) if (!labels.includes(l)) labels.push(l);
    return categorical(key, values, labels);
  }
  if (values.every((v) => typeof v === 'number' && Number.isFinite(v))) {
    const isLog = domain && typeof domain === 'object'
      && ('loguniform' in domain || 'qloguniform' in domain) && values.every((v) => v > 0);
    if (isLog) { // parcoords has no log axis: plot log10 and label the decades
      const logs = values.map(Math.log10);
      const lo = Math.floor(Math.min(...logs));
      const hi = Math.max(Math.ceil(Math.max(...logs)), lo + 1);
      const tickvals = Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
      return { label: `${key} (log)`, values: logs, range: [lo, hi], tickvals,
        ticktext: tickvals.map((p) => `1e${p}`) };
    }
    const min = Math.min(...values);
    const max = Math.max(...values);
    const pad = Math.abs(min) * 0.1 || 1; // a constant column still gets a visible axis
    return { label: key, values, range: min === max ? [min - pad, max + pad] : [min, max] };
  }
  // Categorical (strings, booleans, lists, missing): each distinct label gets an index.
  return categorical(key, values, [...new Set(values.map(categoryLabel))].sort(collator.compare));
}

// The algorithms' default search spaces (GET /algorithms), asked once: a sweep whose spec
// leaves `search.space` out searches its algorithm's, whose `choice` keys the parcoords
// draws as categories too.
let defaultSpaces = null;
let spacesReq = null;

function loadSpaces(exp) {
  const given = exp.spec && exp.spec.search && exp.spec.search.space;
  if (given || defaultSpaces) return Promise.resolve();
  spacesReq = spacesReq || api('/algorithms').then((list) => {
    defaultSpaces = Object.fromEntries(list.map((a) => [a.name, a.default_space || {}]));
  }).catch(() => { spacesReq = null; }); // the axes are then drawn from the values alone
  return spacesReq;
}

/** The domains a sweep searched, as written: its spec's space, else its algorithm's. */
function spaceOf(exp) {
  const given = exp.spec && exp.spec.search && exp.spec.search.space;
  return given || (defaultSpaces && defaultSpaces[exp.algorithm]) || {};
}

/** `force` skips the throttle (used for the final draw of a finished sweep). */
function renderParcoords(force) {
  const s = state.exp;
  const el = $('#parcoords');
  if (!window.Plotly) return chartNote('parcoords', 'Charts unavailable: plotly.min.js did not load.');
  const rows = s.trials.filter((t) => typeof t.best_metric === 'number' && Number.isFinite(t.best_metric));
  if (!rows.length || !s.configKeys.length) {
    if (s.parcoordsSig) Plotly.purge(el);
    s.parcoordsSig = '';
    // no trial yet: nothing is known of its keys; a sweep with trials and no keys has none
    let note = 'No sampled hyperparameters in this sweep.';
    if (!s.trials.length) note = 'Appears once trials have started and report the metric.';
    else if (s.configKeys.length) note = 'Appears once trials report the metric.';
    return chartNote('parcoords', note);
  }
  const space = spaceOf(s.data);
  const dims = s.configKeys.map((k) => dimension(k, rows.map((t) => (t.config || {})[k]), space[k]));
  const metricValues = rows.map((t) => t.best_metric);
  const shortMetric = String(s.data.metric || 'metric').split('/').pop();
  dims.push({ label: `best ${shortMetric}`, values: metricValues });
  // A few hundred numbers: stringifying them is a cheap, exact signature.
  const sig = JSON.stringify([dims, s.data.mode]);
  if (sig === s.parcoordsSig) return;
  // The parcoords is a summary and the costliest redraw (WebGL, every line): while the
  // sweep runs it is redrawn at most every PARCOORDS_MIN_MS, not on every poll.
  const now = performance.now();
  if (!force && s.parcoordsSig && now - s.parcoordsAt < PARCOORDS_MIN_MS) return;
  s.parcoordsSig = sig;
  s.parcoordsAt = now;
  chartNote('parcoords', rows.length < s.trials.length
    ? `${rows.length} of ${s.trials.length} trials have reported the metric.` : '');
  const trace = {
    type: 'parcoords',
    dimensions: dims,
    line: {
      color: metricValues,
      colorscale: 'Viridis',
      reversescale: s.data.mode === 'min', // bright = good in both modes
      showscale: true,
      colorbar: { title: { text: 'best' }, thickness: 12, x: 1.06 },
    },
  };
  const layout = { height: 400, margin: { l: 70, r: 110, t: 60, b: 30 }, uirevision: s.id };
  Plotly.react(el, [trace], layout, PLOT_CONFIG);
}

/** Hyperparameter importance (tuner/importance.py), from the experiment itself: fANOVA
 * (`importance`) and PED-ANOVA (`importance_ped_anova`) as horizontal bars, the key that
 * mattered most on top. Live while the sweep runs, final once it has ended. */
function renderImportance(exp) {
  const s = state.exp;
  const el = $('#importance');
  const fanova = exp.importance || {};
  const ped = exp.importance_ped_anova || {};
  const terminal = isIn('terminal', exp.status);
  const sig = JSON.stringify([fanova, ped, terminal]);
  if (sig === s.importanceSig) return;
  s.importanceSig = sig;
  if (!window.Plotly) return chartNote('importance', 'Charts unavailable: plotly.min.js did not load.');
  const keys = Object.keys(fanova).sort((a, b) => fanova[b] - fanova[a] || collator.compare(a, b));
  if (!keys.length) {
    Plotly.purge(el);
    return chartNote('importance', terminal
      ? 'Too few finished trials to tell what mattered.'
      : 'Not enough finished trials yet: appears once a few search trials have finished.');
  }
  chartNote('importance', terminal ? ''
    : 'Live: over the trials finished so far, by their best metric; final when the sweep ends.');
  const bar = (name, values, color) => ({
    type: 'bar',
    orientation: 'h',
    name,
    y: keys,
    x: keys.map((k) => values[k] ?? 0),
    marker: { color },
    hovertemplate: `%{y}<br>${name} %{x:.3f}<extra></extra>`,
  });
  const traces = [bar('fANOVA', fanova, '#0969da')];
  if (Object.keys(ped).length) traces.push(bar('PED-ANOVA', ped, '#bf8700'));
  const layout = {
    height: Math.max(220, 90 + keys.length * (traces.length * 16 + 12)),
    margin: { l: 10, r: 20, t: 30, b: 40 },
    barmode: 'group',
    xaxis: { title: { text: 'share of importance' }, range: [0, 1], zeroline: false },
    yaxis: { autorange: 'reversed', automargin: true }, // largest first, on top
    legend: { orientation: 'h', x: 0, y: 1.02, yanchor: 'bottom' },
    uirevision: s.id,
  };
  Plotly.react(el, traces, layout, PLOT_CONFIG);
}

// ---------------------------------------------------------------- actions

/** Copy text; navigator.clipboard needs a secure context, so fall back to a textarea. */
async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return;
  } catch { /* not available (plain http) or denied */ }
  const ta = document.createElement('textarea');
  ta.value = text;
  ta.setAttribute('readonly', '');
  ta.style.position = 'fixed';
  ta.style.opacity = '0';
  document.body.appendChild(ta);
  ta.select();
  const ok = document.execCommand('copy');
  ta.remove();
  if (!ok) throw new Error('copy refused');
}

async function onCopy(event) {
  const btn = event.currentTarget;
  const best = state.exp && state.exp.data && state.exp.data.best;
  if (!best) return;
  const full = btn.id === 'copy-best-full';
  const label = full ? 'Copy full config' : 'Copy';
  try {
    await copyText(JSON.stringify((full ? best.full_config : best.config) ?? {}, null, 2));
    btn.textContent = 'Copied';
  } catch {
    btn.textContent = 'Copy failed';
  }
  setTimeout(() => { btn.textContent = label; }, 1500);
}

async function sweepAction(kind) {
  const s = state.exp;
  const exp = s && s.data;
  if (!exp) return;
  if (kind === 'stop' && !window.confirm(`Stop sweep "${exp.name || exp.id}"? Running trials are ended.`)) return;
  const btn = $(`#${kind}-button`);
  btn.disabled = true;
  const msg = $('#action-message');
  try {
    const updated = await api(`/experiments/${encodeURIComponent(exp.id)}/${kind}`, 'POST');
    show(msg, false);
    if (state.exp === s && updated) {
      s.data = updated;
      s.finalFetched = false;
      renderHeader(updated);
    }
  } catch (err) {
    setText(msg, `Could not ${kind} the sweep: ${err instanceof HttpError ? err.message : describeError(err)}`);
    show(msg, true);
    if (state.exp === s) renderHeader(s.data); // restore the buttons' state
  }
  refreshNow();
}

// ---------------------------------------------------------------- new sweep

let examples = null;

async function loadExamples() {
  if (examples) return;
  try {
    examples = await api('/examples');
  } catch (err) {
    examples = [];
    setText($('#new-status'), `Examples unavailable: ${describeError(err)}`);
  }
  // an example that needs more than a plain `make run` says so in the list
  const options = examples.map((e) => `<option value="${esc(e.name)}">${esc(e.name)}${
    (e.needs || []).length ? ` (needs ${esc(e.needs.join('; '))})` : ''}</option>`);
  setHtml($('#example-select'), `<option value="">—</option>${options.join('')}`);
}

/** What the chosen example needs of the service, beside the list (hidden for none). */
function showNeeds(example) {
  const needs = (example && example.needs) || [];
  setText($('#example-needs'), needs.length
    ? `This example needs ${needs.join(' and ')}: ${needs.map(needHint).join(' ')}` : '');
  show($('#example-needs'), needs.length > 0);
}

function needHint(need) {
  if (need.startsWith('TUNER_ALLOWED_MODULES=')) {
    return `start the service with ${need} (e.g. \`${need} make run\`), so it may import that code.`;
  }
  return 'run that sweep first: this one starts from its trials.';
}

function specPayload() {
  const text = $('#spec-text').value;
  const json = /^\s*[{[]/.test(text);
  return { body: text, type: json ? 'application/json' : 'application/yaml' };
}

function showProblems(problems) {
  const items = (problems || []).map((p) => `<li><code>${esc(p.loc)}</code>: ${esc(p.msg)}${
    p.value === undefined || p.value === null ? '' : ` (got <code>${esc(JSON.stringify(p.value))}</code>)`}</li>`);
  setHtml($('#spec-problems'), items.join(''));
  show($('#spec-problems'), items.length > 0);
}

function specEdited() {
  $('#submit-button').disabled = true; // preview what you submit
  show($('#plan-box'), false);
}

/** The most a sweep can run, by what its stop criteria cap: env steps, iterations, time. */
function planLimit(plan) {
  const limits = [];
  if (plan.max_env_steps != null) limits.push(`${fmtNum(plan.max_env_steps)} env steps`);
  if (plan.max_iterations != null) limits.push(`${fmtNum(plan.max_iterations)} iterations`);
  if (plan.max_time_s != null) limits.push(`${fmtNum(plan.max_time_s)} s`);
  return limits.length ? limits.join(', ') : 'no limit';
}

async function previewSpec() {
  setText($('#new-status'), 'Checking…');
  showProblems([]);
  try {
    const plan = await api('/experiments?dry_run=true', 'POST', specPayload());
    setText($('#plan-trials'), `${plan.trials} search${plan.confirm_trials ? ` + ${plan.confirm_trials} confirmation` : ''}`);
    setText($('#plan-per-trial'), Object.entries(plan.per_trial).filter(([, v]) => v)
      .map(([k, v]) => `${fmtNum(v)} ${k}`).join(', '));
    setText($('#plan-concurrent'), plan.concurrent == null ? 'unknown'
      : `${plan.concurrent} (limited by ${plan.limited_by})`);
    setText($('#plan-steps'), planLimit(plan));
    setText($('#plan-fits'), plan.fits ? 'yes' : 'no');
    const base = Object.entries(plan.base_settings || {}).filter(([k]) => k !== 'source');
    setText($('#plan-base'), base.length
      ? `${base.map(([k, v]) => `${k}: ${v}`).join(', ')} (${plan.base_settings.source})` : 'none');
    const sched = plan.scheduler || {};
    setText($('#plan-warnings'), (plan.warnings || []).join(' · ') || 'none');
    setText($('#plan-scheduler'), sched.type && sched.type !== 'fifo' ? schedulerLine(sched) : 'fifo (no early stopping)');
    setText($('#plan-race'), plan.race
      ? `each config on up to seeds ${plan.race.seeds.join(', ')}; ${plan.race.rule}` : 'none (one seed a config)');
    const sampler = plan.sampler;
    setText($('#plan-sampler'), sampler
      ? `${sampler.type}, the first ${sampler.n_startup_trials} trials at random`
      : 'none (grid or random search)');
    const warm = plan.warm_start;
    setText($('#plan-warm'), warm
      ? `from ${warm.from}: ${warm.first.length} configs first, ${warm.told_to_optuna} told to Optuna`
      : 'none');
    show($('#plan-box'), true);
    showProblems(plan.problems);
    $('#submit-button').disabled = !plan.fits;
    setText($('#new-status'), plan.fits ? 'Ready to submit.' : 'It does not fit the cluster.');
  } catch (err) {
    show($('#plan-box'), false);
    $('#submit-button').disabled = true;
    showProblems(err.problems || []);
    setText($('#new-status'), err.problems ? 'The spec has problems:' : describeError(err));
  }
}

async function submitSpec() {
  $('#submit-button').disabled = true;
  setText($('#new-status'), 'Submitting…');
  try {
    const created = await api('/experiments', 'POST', specPayload());
    setText($('#new-status'), `Submitted ${created.id}.`);
    location.hash = `#/experiments/${encodeURIComponent(created.id)}`;
  } catch (err) {
    showProblems(err.problems || []); // the problems by field, listed below
    setText($('#new-status'), err.problems ? `Not submitted (HTTP ${err.status}):`
      : `Not submitted: ${err instanceof HttpError ? err.message : describeError(err)}`);
  }
}

function wireNewSweep() {
  $('#example-select').addEventListener('change', (e) => {
    const example = (examples || []).find((x) => x.name === e.target.value);
    if (example) $('#spec-text').value = example.spec;
    showNeeds(example);
    specEdited();
  });
  $('#spec-file').addEventListener('change', async (e) => {
    const file = e.target.files && e.target.files[0];
    if (file) $('#spec-text').value = await file.text();
    specEdited();
  });
  $('#spec-text').addEventListener('input', () => {
    // typed over: the text is no longer the example the dropdown names
    const example = (examples || []).find((x) => x.name === $('#example-select').value);
    if (example && $('#spec-text').value !== example.spec) {
      $('#example-select').value = '';
      showNeeds(null);
    }
    specEdited();
  });
  $('#preview-button').addEventListener('click', previewSpec);
  $('#submit-button').addEventListener('click', submitSpec);
}

// ---------------------------------------------------------------- wiring

function init() {
  window.addEventListener('hashchange', onRoute);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') refreshNow();
    else clearTimeout(timer);
  });

  $('#status-filter').addEventListener('change', (e) => {
    location.hash = listHash(e.target.value, 0);
  });
  $('#prev-page').addEventListener('click', () => {
    location.hash = listHash(state.route.status, Math.max(0, state.route.offset - PAGE_SIZE));
  });
  $('#next-page').addEventListener('click', () => {
    location.hash = listHash(state.route.status, state.route.offset + PAGE_SIZE);
  });
  // One delegated listener per table instead of one per row.
  $('#experiments-table tbody').addEventListener('click', (e) => {
    const pick = e.target.closest('input.pick');
    if (pick) {
      if (pick.checked) state.picked.add(pick.value);
      else state.picked.delete(pick.value);
      const n = state.picked.size;
      $('#compare-button').disabled = n < 2 || n > COMPARE_MOST;
      return;
    }
    const tr = e.target.closest('tr[data-id]');
    if (tr && !e.target.closest('a')) location.hash = `#/experiments/${encodeURIComponent(tr.dataset.id)}`;
  });
  $('#compare-button').addEventListener('click', () => {
    location.hash = `#/compare?ids=${[...state.picked].map(encodeURIComponent).join(',')}`;
  });
  $('#trials-table thead').addEventListener('click', (e) => {
    const th = e.target.closest('th[data-key]');
    if (!th || !state.exp) return;
    const sort = state.exp.sort;
    sort.dir = sort.key === th.dataset.key ? -sort.dir : 1;
    sort.key = th.dataset.key;
    renderTrials();
  });

  wireNewSweep();
  $('#copy-best').addEventListener('click', onCopy);
  $('#copy-best-full').addEventListener('click', onCopy);
  $('#stop-button').addEventListener('click', () => sweepAction('stop'));
  $('#resume-button').addEventListener('click', () => sweepAction('resume'));
  $('#token-box').addEventListener('submit', (e) => {
    e.preventDefault();
    const value = $('#token-input').value.trim();
    memoryToken = value;
    try {
      if (value) localStorage.setItem(TOKEN_KEY, value);
      else localStorage.removeItem(TOKEN_KEY);
    } catch { /* storage disabled: memoryToken lasts until the page closes */ }
    $('#token-input').value = '';
    show($('#token-box'), false);
    refreshNow();
    refreshCluster();
  });

  onRoute();
  refreshCluster();
}

// Handles for end-to-end tests and debugging from the console.
window.tuner = { state, refresh };
init();
