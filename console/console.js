// The sluice console page (docs/operations-console.md): polls the debug listener's JSON endpoints
// and draws them. Plain ES module, no dependencies; every value from the server is inserted as
// text (never as HTML). `?refresh=MS` changes the polling period (default 2000 ms).

const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(200, Number(params.get('refresh')) || 2000);

/** Create an element: h('td', {class: 'num'}, 'text', child...). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const $ = (id) => document.getElementById(id);

/**
 * `text` with a line-break opportunity after each separator (. _ , = : / | - and space), so a
 * narrow column wraps a rule or counter key between its parts, never inside a word (.key cells
 * do not break anywhere else).
 */
function breakable(text) {
  const parts = String(text).split(/(?<=[._,=:/|-])/);
  return parts.flatMap((part, i) => (i === 0 ? [part] : [h('wbr'), part]));
}
const fmt = new Intl.NumberFormat('en', { maximumFractionDigits: 1 });
const int = new Intl.NumberFormat('en');

function duration(ms) {
  if (ms === undefined || ms === null) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 120) return `${fmt.format(s)} s`;
  const m = s / 60;
  if (m < 120) return `${fmt.format(m)} min`;
  const hours = m / 60;
  if (hours < 48) return `${fmt.format(hours)} h`;
  return `${fmt.format(hours / 24)} d`;
}

async function getJson(path) {
  const res = await fetch(path, { cache: 'no-store' });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

/** The reset token the operator typed (DEBUG_CONSOLE_RESET_TOKEN), kept in this page only. */
let resetToken;

async function postJson(path, body) {
  const headers = { 'Content-Type': 'application/json' };
  if (resetToken !== undefined) headers.Authorization = `Bearer ${resetToken}`;
  const res = await fetch(path, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
  });
  let data;
  try {
    data = await res.json();
  } catch {
    data = { error: `HTTP ${res.status}` };
  }
  return { status: res.status, data };
}

// ---- Now -------------------------------------------------------------------------------------

const SVG = 'http://www.w3.org/2000/svg';

/**
 * Draw `values` (oldest first) as a line in a 300x60 box. The scale's label (the largest value)
 * is HTML text next to the chart, not SVG text, which the box's stretching would distort.
 */
function sparkline(svg, values, unit) {
  svg.replaceChildren();
  const max = Math.max(1, ...values);
  if (values.length > 1) {
    const step = 300 / (values.length - 1);
    const points = values
      .map((v, i) => `${(i * step).toFixed(1)},${(58 - (v / max) * 50).toFixed(1)}`)
      .join(' ');
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', points);
    svg.append(line);
  }
  const last = values.at(-1);
  $(`${svg.id}-label`).textContent =
    `now ${fmt.format(last ?? 0)}${unit} · top of the scale ${fmt.format(max)}${unit}`;
  svg.setAttribute(
    'aria-label',
    `${svg.getAttribute('aria-label').split(':')[0]}: now ${fmt.format(last ?? 0)}${unit}, highest ${fmt.format(max)}${unit} over ${values.length} samples`,
  );
}

let rulesVersion = -1;

/** Why a reset would be refused, or undefined when resets work (from the latest /api/now). */
let resetRefusal = 'Reset is off. Start sluice with DEBUG_CONSOLE_RESET_ENABLED=true to allow it.';

function renderNow(now) {
  const rates = now.rates ?? { okPerSecond: 0, overLimitPerSecond: 0 };
  $('rate-ok').textContent = fmt.format(rates.okPerSecond);
  $('rate-over').textContent = fmt.format(rates.overLimitPerSecond);
  $('calls-ok').textContent = int.format(now.calls.ok);
  $('calls-over').textContent = int.format(now.calls.overLimit);
  $('calls-errors').textContent = int.format(now.calls.errors);
  const store = now.store;
  const failure = store.backend === 'redis' ? `, on failure: ${store.failureMode}` : '';
  $('store').replaceChildren(
    `${store.backend}${failure}, `,
    h(
      'span',
      { class: store.healthy ? 'ok-text' : 'over-text' },
      store.healthy ? 'healthy' : 'failing',
    ),
  );
  $('keys').textContent = int.format(store.keys);
  const config = now.config;
  $('config').textContent =
    `version ${config.version}: ${config.domains} domains, ${config.rules} rules`;
  const last = config.lastLoad;
  if (last === undefined || last === null) {
    $('last-load').textContent = '–';
  } else {
    $('last-load').replaceChildren(
      h('span', { class: last.ok ? 'ok-text' : 'over-text' }, last.ok ? 'loaded' : 'refused'),
      ` ${new Date(last.at).toLocaleTimeString()}`,
      last.ok ? '' : ' (the previous rules keep serving)',
    );
  }
  $('load-problems').replaceChildren(...(last?.problems ?? []).map((p) => h('li', {}, p)));
  $('uptime').textContent = duration(now.uptimeMs);
  const points = now.series.points;
  const live = now.rates ? [now.rates] : [];
  const all = [...points, ...live];
  sparkline(
    $('chart-ok'),
    all.map((p) => p.okPerSecond),
    '/s',
  );
  sparkline(
    $('chart-over'),
    all.map((p) => p.overLimitPerSecond),
    '/s',
  );
  sparkline(
    $('chart-keys'),
    all.map((p) => p.keys),
    '',
  );
  const health = now.health.serving ? 'serving' : `not serving: ${now.health.reasons.join(', ')}`;
  $('status').textContent =
    `sluice ${now.version}, ${health}, updated ${new Date(now.time).toLocaleTimeString()}`;
  resetRefusal = now.resetEnabled
    ? store.canReset
      ? undefined
      : `Reset is on, but the ${store.backend} store cannot reset counters.`
    : 'Reset is off. Start sluice with DEBUG_CONSOLE_RESET_ENABLED=true to allow it.';
  $('reset-note').textContent =
    resetRefusal ??
    'Reset is on: a reset counter starts from empty. Every reset is logged with your address.';
  // A refused reset is not offered: the form's button is disabled (and shown so) like each row's.
  $('reset-submit').disabled = resetRefusal !== undefined;
  $('reset-submit').title = resetRefusal ?? '';
  if (config.version !== rulesVersion) {
    rulesVersion = config.version;
    loadRules().catch(showError);
  }
}

// ---- Rules -----------------------------------------------------------------------------------

function limitText(limit) {
  const per = limit.unitMultiplier > 1 ? `${limit.unitMultiplier} ${limit.unit}s` : limit.unit;
  const burst = limit.algorithm === 'token_bucket' ? `, burst ${limit.burst}` : '';
  const name = limit.name ? ` "${limit.name}"` : '';
  return `${limit.requestsPerUnit} / ${per}, ${limit.algorithm}${burst}${name}`;
}

function ruleSummary(rule) {
  if (rule === undefined || rule === null) return [];
  const parts = [
    h(
      'span',
      { class: 'rule' },
      rule.unlimited ? 'unlimited' : rule.limits.map(limitText).join(' and '),
    ),
  ];
  if (rule.shadowMode) parts.push(h('span', { class: 'tag' }, 'shadow'));
  if (rule.quotaMode) parts.push(h('span', { class: 'tag' }, 'quota'));
  if (rule.shareThreshold) parts.push(h('span', { class: 'tag' }, 'shared'));
  if (rule.replaces.length > 0)
    parts.push(h('span', { class: 'tag' }, `replaces ${rule.replaces.join(', ')}`));
  return parts;
}

function nodeItem(node) {
  const label = node.value === '' ? node.key : `${node.key} = ${node.value}`;
  const kind = node.kind === 'exact' ? undefined : h('span', { class: 'tag' }, node.kind);
  const noRule = node.rule
    ? undefined
    : node.children.length === 0
      ? h('span', { class: 'tag' }, 'no limit')
      : undefined;
  const text = [
    node.key,
    node.value,
    node.rule?.fullKey ?? '',
    ...(node.rule?.limits ?? []).map((l) => l.name),
  ]
    .join(' ')
    .toLowerCase();
  const li = h(
    'li',
    { 'data-text': text },
    h('span', { class: 'key' }, label),
    kind,
    noRule,
    ...ruleSummary(node.rule),
  );
  if (node.children.length > 0) li.append(h('ul', {}, node.children.map(nodeItem)));
  return li;
}

async function loadRules() {
  const { domains } = await getJson('/api/rules');
  const tree = h(
    'ul',
    { 'aria-label': 'Loaded domains' },
    domains.map((domain) =>
      h(
        'li',
        { 'data-text': domain.domain.toLowerCase(), class: 'domain' },
        h('strong', {}, `domain ${domain.domain}`),
        h('span', { class: 'muted' }, ` (${domain.files.join(', ')})`),
        h('ul', {}, domain.descriptors.map(nodeItem)),
      ),
    ),
  );
  $('rule-tree').replaceChildren(tree);
  filterRules();
}

/** Show the nodes whose text (or a descendant's) holds the query; hide the rest. */
function filterRules() {
  const query = $('rule-search').value.trim().toLowerCase();
  let shown = 0;
  const visit = (li) => {
    const children = [...li.querySelectorAll(':scope > ul > li')];
    let childMatch = false;
    for (const child of children) if (visit(child)) childMatch = true;
    const self = query === '' || li.dataset.text.includes(query);
    const visible = self || childMatch;
    li.hidden = !visible;
    if (self && query !== '' && !li.classList.contains('domain')) shown++;
    return visible;
  };
  for (const li of document.querySelectorAll('#rule-tree > ul > li')) visit(li);
  $('rule-count').textContent = query === '' ? '' : `${shown} matching descriptors`;
}

// ---- Hot keys --------------------------------------------------------------------------------

function resetButton(key) {
  return h(
    'button',
    {
      type: 'button',
      class: 'small',
      'aria-label': `Reset counter ${key}`,
      disabled: resetRefusal !== undefined,
      title: resetRefusal,
      onclick: () => resetKey(key),
    },
    'Reset',
  );
}

function counterTable(rows, caption) {
  if (rows.length === 0) return h('p', { class: 'muted' }, 'None.');
  return h(
    'table',
    {},
    h('caption', { class: 'muted' }, caption),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, 'Counter'),
        h('th', { scope: 'col' }, 'Rule'),
        h('th', { scope: 'col', class: 'num' }, 'Count'),
        h('th', { scope: 'col', class: 'num' }, 'Limit'),
        h('th', { scope: 'col', class: 'num' }, 'Remaining'),
        h('th', { scope: 'col', class: 'num' }, 'Empty in'),
        h('th', { scope: 'col' }, h('span', { class: 'muted' }, 'Action')),
      ),
    ),
    h(
      'tbody',
      {},
      rows.map((row) =>
        h(
          'tr',
          { 'data-key': row.key },
          h(
            'td',
            { class: 'key' },
            breakable(
              row.entries
                ? `${row.domain}: ${row.entries.map((e) => `${e.key}=${e.value}`).join(', ')}`
                : row.key,
            ),
          ),
          h('td', { class: 'key' }, breakable(row.rule ?? '–')),
          h('td', { class: 'num' }, fmt.format(row.count)),
          h('td', { class: 'num' }, int.format(row.limit)),
          h(
            'td',
            { class: row.remaining <= 0 ? 'num over-text' : 'num' },
            fmt.format(row.remaining),
          ),
          h('td', { class: 'num' }, duration(row.resetMs)),
          h(
            'td',
            {},
            row.keyCut ? h('span', { class: 'muted' }, 'key too long') : resetButton(row.key),
          ),
        ),
      ),
    ),
  );
}

function renderHot(hot) {
  $('hot-note').textContent = hot.listsCounters
    ? `${int.format(hot.size)} counters held.`
    : 'This store does not list its counters (Redis keeps them); the rules below come from the metrics.';
  $('hot-limited').replaceChildren(counterTable(hot.limited, 'Counters with no room left'));
  $('hot-busiest').replaceChildren(counterTable(hot.busiest, 'Counters with the most hits'));
  $('hot-rules').replaceChildren(
    hot.rules.length === 0
      ? h('p', { class: 'muted' }, 'None.')
      : h(
          'table',
          {},
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', { scope: 'col' }, 'Rule'),
              h('th', { scope: 'col', class: 'num' }, 'Over-limit hits'),
            ),
          ),
          h(
            'tbody',
            {},
            hot.rules.map((r) =>
              h(
                'tr',
                {},
                h(
                  'td',
                  { class: 'key' },
                  breakable([r.domain, r.key1, r.key2].filter(Boolean).join('.')),
                ),
                h('td', { class: 'num' }, int.format(r.overLimit)),
              ),
            ),
          ),
        ),
  );
}

// ---- Quota (RLQS) -----------------------------------------------------------------------------

/** Buckets asked of /api/rlqs, and streams drawn per bucket (the rest are counted). */
const RLQS_BUCKETS = 10;
const RLQS_STREAMS = 10;

/** `n` and `noun`, with an s unless n is 1. */
function plural(n, noun) {
  return `${int.format(n)} ${noun}${n === 1 ? '' : 's'}`;
}

/** The bucket's rule and limit in words (the endpoint's `rule`, docs/rlqs.md "Mapping"). */
function quotaRuleText(bucket) {
  const rule = bucket.rule;
  if (rule.allow === 'no_rule') return 'no rule: allowed';
  if (rule.allow !== undefined) return `${rule.allow.replace('_', ' ')}: allowed`;
  const burst = rule.algorithm === 'token_bucket' ? `, burst ${int.format(rule.burst)}` : '';
  return `rule ${rule.key}: ${int.format(bucket.limit)} / ${duration(rule.windowMs)}, ${rule.algorithm}${burst}`;
}

/** The strategy last sent to a stream, as Envoy enforces it. */
function strategyText(strategy) {
  if (strategy === undefined || strategy === null) return '–';
  if (strategy.kind === 'allow_all') return 'allow-all';
  if (strategy.kind === 'deny_all') return 'deny-all';
  return `token bucket ${int.format(strategy.tokensPerFill)} / ${duration(strategy.fillIntervalMs)}, max ${int.format(strategy.maxTokens)}`;
}

function quotaBucket(bucket) {
  const id = bucket.bucketId.map((e) => `${e.key}=${e.value}`).join(', ');
  const more = bucket.moreEntries ? ` and ${bucket.moreEntries} more entries` : '';
  const shown = bucket.streams.slice(0, RLQS_STREAMS);
  const hidden = bucket.streams.length - shown.length + (bucket.moreStreams ?? 0);
  return h(
    'div',
    { class: 'quota-bucket' },
    h(
      'h3',
      { class: 'key' },
      breakable(`${bucket.domain}: ${id}${more}`),
      h('span', { class: 'rule' }, quotaRuleText(bucket)),
    ),
    h(
      'table',
      {},
      h(
        'caption',
        { class: 'muted' },
        `${plural(bucket.streams.length + (bucket.moreStreams ?? 0), 'Envoy stream')}, demand ${int.format(bucket.demand)} per window`,
      ),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Stream'),
          h('th', { scope: 'col', class: 'num' }, 'Allowed'),
          h('th', { scope: 'col', class: 'num' }, 'Denied'),
          h('th', { scope: 'col', class: 'num' }, 'Demand'),
          h('th', { scope: 'col', class: 'num' }, 'Share'),
          h('th', { scope: 'col', class: 'num' }, 'Sent'),
          h('th', { scope: 'col' }, 'Strategy sent'),
          h('th', { scope: 'col', class: 'num' }, 'TTL'),
        ),
      ),
      h(
        'tbody',
        {},
        shown.map((s, i) =>
          h(
            'tr',
            {},
            h('td', {}, `#${i + 1}`),
            h(
              'td',
              { class: 'num', title: `in the last report (${duration(s.elapsedMs)})` },
              int.format(s.allowed),
            ),
            h('td', { class: s.denied > 0 ? 'num over-text' : 'num' }, int.format(s.denied)),
            h('td', { class: 'num' }, int.format(s.demand)),
            h('td', { class: 'num' }, bucket.limit === undefined ? '–' : int.format(s.share)),
            h(
              'td',
              { class: 'num' },
              s.sent === undefined || bucket.limit === undefined ? '–' : int.format(s.sent),
            ),
            h('td', {}, strategyText(s.strategy)),
            h('td', { class: 'num' }, duration(s.ttlMs)),
          ),
        ),
      ),
    ),
    hidden > 0 ? h('p', { class: 'muted' }, `and ${plural(hidden, 'more stream')}`) : undefined,
  );
}

/** Draw /api/rlqs; `undefined`: this process does not serve RLQS (the endpoint is absent). */
function renderRlqs(rlqs) {
  const section = $('rlqs');
  if (rlqs === undefined) {
    section.classList.add('off');
    $('rlqs-note').textContent = 'This sluice does not serve the Rate Limit Quota Service.';
    $('rlqs-buckets').replaceChildren();
    return;
  }
  section.classList.remove('off');
  if (rlqs.streams === 0) {
    // docs/ is not shipped with the package and the page loads nothing from elsewhere, so the
    // guide is named, not linked.
    $('rlqs-note').replaceChildren(
      'No Envoy has a quota stream open. Add the ',
      h('code', {}, 'envoy.filters.http.rate_limit_quota'),
      " filter to Envoy with sluice's gRPC port as its RLQS server and a ",
      h('code', {}, 'domain'),
      ' of your rule files: ',
      h('code', {}, 'docs/rlqs.md'),
      ' ("An Envoy configuration") has a complete envoy.yaml. Its buckets then show here.',
    );
    $('rlqs-buckets').replaceChildren();
    return;
  }
  const shown = rlqs.list.length;
  $('rlqs-note').textContent =
    `${plural(rlqs.streams, 'stream')} open, ${plural(rlqs.buckets, 'bucket')}` +
    (rlqs.buckets > shown ? ` (the ${shown} busiest shown)` : '') +
    ". Allowed and denied are each stream's last report; demand, share and sent are requests per window of the rule.";
  $('rlqs-buckets').replaceChildren(...rlqs.list.map(quotaBucket));
}

// ---- Try it ----------------------------------------------------------------------------------

function parseDescriptors(text) {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .map((line) => ({
      entries: line.split(',').map((pair) => {
        const at = pair.indexOf('=');
        return at < 0
          ? { key: pair.trim(), value: '' }
          : { key: pair.slice(0, at).trim(), value: pair.slice(at + 1).trim() };
      }),
    }));
}

function pathText(steps) {
  if (steps.length === 0) return 'no tree for this domain';
  return steps
    .map((s) =>
      s.matched === 'none'
        ? `${s.entry.key}=${s.entry.value}: no match`
        : `${s.entry.key}=${s.entry.value} → ${s.node.value === '' ? s.node.key : `${s.node.key}=${s.node.value}`} (${s.matched})`,
    )
    .join(' ▸ ');
}

function renderTry(result, hits) {
  const overall = h(
    'p',
    {},
    `Answer for ${int.format(hits)} ${hits === 1 ? 'hit' : 'hits'}: `,
    h(
      'strong',
      { class: result.overallCode === 'OK' ? 'ok-text' : 'over-text', id: 'try-overall' },
      result.overallCode,
    ),
    result.knownDomain ? '' : ' (unknown domain: every descriptor is OK)',
    ' · nothing was charged',
  );
  const rows = result.descriptors.map((d, i) =>
    h(
      'tr',
      {},
      h('td', { class: 'key' }, breakable(d.entries.map((e) => `${e.key}=${e.value}`).join(', '))),
      h('td', { class: 'key' }, breakable(d.rule ? d.rule.fullKey : 'no rule')),
      h('td', {}, d.rule ? ruleSummary(d.rule) : '–'),
      h('td', { class: 'key' }, breakable(pathText(d.path))),
      h(
        'td',
        { class: d.code === 'OK' ? 'ok-text' : 'over-text', 'data-testid': `try-code-${i}` },
        d.code,
      ),
      h(
        'td',
        { class: 'num' },
        d.rule?.unlimited ? 'unlimited' : d.rule ? int.format(d.limitRemaining) : '–',
      ),
      h('td', { class: 'num' }, duration(d.durationUntilResetMs)),
    ),
  );
  $('try-result').replaceChildren(
    overall,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...[
            'Descriptor',
            'Rule',
            'Limit',
            'Path through the tree',
            'Code',
            'Remaining now',
            'Reset in',
          ].map((t) => h('th', { scope: 'col' }, t)),
        ),
      ),
      h('tbody', {}, rows),
    ),
  );
}

async function submitTry(event) {
  event.preventDefault();
  const hits = Number($('try-hits').value) || 1;
  const body = {
    domain: $('try-domain').value.trim(),
    descriptors: parseDescriptors($('try-descriptors').value),
    hits_addend: hits,
  };
  const { status, data } = await postJson('/api/try', body);
  if (status !== 200) {
    $('try-result').replaceChildren(h('p', { class: 'over-text' }, `Refused: ${data.error}`));
    return;
  }
  renderTry(data, hits);
}

// ---- Reset -----------------------------------------------------------------------------------

async function resetKey(key) {
  let { status, data } = await postJson('/api/reset', { key });
  if (status === 401) {
    // The listener wants DEBUG_CONSOLE_RESET_TOKEN: ask once, then retry with it.
    const token = prompt('Reset token (DEBUG_CONSOLE_RESET_TOKEN):');
    if (token) {
      resetToken = token;
      ({ status, data } = await postJson('/api/reset', { key }));
    }
  }
  $('reset-result').textContent =
    status === 200
      ? data.reset.length > 0
        ? `Reset ${data.reset.join(', ')}.`
        : `No counter ${key} (already empty).`
      : `Refused: ${data.error}`;
  $('reset-result').className = status === 200 ? 'ok-text' : 'over-text';
  refresh().catch(showError);
}

// ---- Polling ---------------------------------------------------------------------------------

function showError(err) {
  $('status').textContent = `Cannot reach sluice: ${err.message}. Retrying.`;
}

/** /api/rlqs, or `undefined` when this process has no RLQS endpoint (404). */
async function getRlqs() {
  const res = await fetch(`/api/rlqs?n=${RLQS_BUCKETS}`, { cache: 'no-store' });
  if (res.status === 404) return undefined;
  if (!res.ok) throw new Error(`/api/rlqs: HTTP ${res.status}`);
  return res.json();
}

/** Refreshes so far; /api/rlqs is read on every other one (see refresh). */
let refreshes = 0;

async function refresh() {
  // RLQS assignments change at Envoy's report interval (seconds), so its panel is read every
  // other refresh: the page stays within the JSON budget's share it had (docs/operations-console.md).
  const withRlqs = refreshes++ % 2 === 0;
  const [now, hot, rlqs] = await Promise.all([
    getJson('/api/now'),
    getJson('/api/hot?n=10'),
    withRlqs
      ? getRlqs().then(
          (body) => ({ body }),
          (err) => ({ err }),
        )
      : undefined,
  ]);
  renderNow(now);
  renderHot(hot);
  if (rlqs === undefined) return;
  // A failed read of the quota panel keeps its last drawing and says so; the others still draw.
  if (rlqs.err !== undefined)
    $('rlqs-note').textContent = `Cannot read /api/rlqs: ${rlqs.err.message}.`;
  else renderRlqs(rlqs.body);
}

async function loop() {
  try {
    await refresh();
  } catch (err) {
    showError(err);
  }
  setTimeout(loop, REFRESH_MS);
}

$('rule-search').addEventListener('input', filterRules);
$('try-form').addEventListener('submit', (event) => submitTry(event).catch(showError));
$('reset-form').addEventListener('submit', (event) => {
  event.preventDefault();
  resetKey($('reset-key').value.trim()).catch(showError);
});
loop();
