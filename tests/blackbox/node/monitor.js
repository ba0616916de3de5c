// ninfer black-box test - GET /monitor and GET /monitor/stats on the real daemon: the page, its
// content type and CSP (hashes recomputed here from the served page), the stats fields and how they
// move after a request, agreement with /metrics, the API key (Bearer and x-api-key; never the
// query string), CORS, and the page's own script: run in node against a stub DOM wired to the
// daemon (its charts included), and in headless Chromium when `chromium` is installed.
'use strict';
const crypto = require('crypto');
const vm = require('vm');
const { execFileSync } = require('child_process');
const { main, check, request, sleep, user, TEST_DIR } = require('./harness');

const KEY = 'sekrit';
const auth = { authorization: 'Bearer ' + KEY };

function inlineHash(html, tag) {
    const m = html.match(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`));
    return m && `'sha256-${crypto.createHash('sha256').update(m[1], 'utf8').digest('base64')}'`;
}

function metric(text, name) {
    const m = text.match(new RegExp('^' + name.replace(/[:{}"=]/g, '\\$&') + ' (\\S+)$', 'm'));
    return m ? Number(m[1]) : NaN;
}

// Runs the page's inline script in a fresh VM context with just the browser APIs it uses: elements
// by id (textContent, className, hidden, value, dataset, children, attributes), sessionStorage, location.hash,
// history.replaceState, setTimeout and fetch, relative URLs resolved against the daemon.
function runPageScript(html, base, hash) {
    const script = html.match(/<script>([\s\S]*?)<\/script>/)[1];
    const element = (tag) => ({
        tag, textContent: '', className: '', hidden: false, value: '', dataset: {}, children: [], listeners: {}, attributes: {},
        replaceChildren(...c) { this.children = c; }, append(c) { this.children.push(c); },
        setAttribute(name, v) { this.attributes[name] = String(v); },
        addEventListener(type, fn) { this.listeners[type] = fn; },
    });
    const els = {};
    for (const m of html.matchAll(/<(\w+)[^>]*\sid="(\w+)"([^>]*)>([^<]*)/g)) {
        els[m[2]] = element(m[1]);
        els[m[2]].textContent = m[4];
        els[m[2]].hidden = /\shidden/.test(m[0]);
    }
    const body = element('body');
    const store = new Map();
    const page = { els, body, fetches: [], replaced: null, timers: new Set(), store };
    let locationHash = hash;
    const ctx = {
        document: { getElementById: (id) => els[id] || null, createElement: element, body },
        sessionStorage: { getItem: (k) => (store.has(k) ? store.get(k) : null), setItem: (k, v) => store.set(k, String(v)) },
        location: { get hash() { return locationHash; }, pathname: '/monitor', search: '' },
        history: { replaceState: (s, t, url) => { page.replaced = url; locationHash = ''; } },
        URLSearchParams,
        fetch: (url, opts) => { page.fetches.push({ url, opts }); return fetch(base + url, opts); },
        setTimeout: (fn, ms) => { const t = setTimeout(() => { page.timers.delete(t); fn(); }, ms); page.timers.add(t); return t; },
        clearTimeout: (t) => { clearTimeout(t); page.timers.delete(t); },
    };
    vm.runInNewContext(script, ctx, { filename: 'monitor.html<script>' });
    page.stop = () => { for (const t of page.timers) clearTimeout(t); page.timers.clear(); };
    return page;
}

async function waitFor(predicate, ms) {
    const deadline = Date.now() + ms;
    while (!predicate() && Date.now() < deadline) await sleep(25);
    return predicate();
}

main('monitor', async (start) => {
    const d = await start(['--api-key', KEY, '--cors-origins', 'http://app.example', '--max-concurrency', '2']);
    const client = d.client({ apiKey: KEY });

    // The page: public (no figures in it), HTML, CSP with the hashes of exactly what it serves.
    const page = await request(d.base, 'GET', '/monitor');
    const csp = page.headers['content-security-policy'] || '';
    check(page.status === 200 && page.headers['content-type'] === 'text/html; charset=utf-8', 'GET /monitor: 200 text/html without a key',
        `${page.status} ${page.headers['content-type']}`);
    check(/^<!DOCTYPE html>/.test(page.text) && page.text.includes('/monitor/stats'), 'the page polls /monitor/stats');
    check(/default-src 'none'/.test(csp) && !/unsafe/.test(csp) && /connect-src 'self'/.test(csp), 'CSP: nothing by default, no unsafe-*', csp);
    const scriptHash = inlineHash(page.text, 'script'), styleHash = inlineHash(page.text, 'style');
    check(csp.includes(`script-src ${scriptHash}`) && csp.includes(`style-src ${styleHash}`),
        'CSP hashes equal the SHA-256 of the served inline script and style', `${csp} vs ${scriptHash} ${styleHash}`);
    check(!/(https?:)?\/\/[a-z]|\ssrc=|\shref=|@import|url\(/i.test(page.text.replace(/<!--[\s\S]*?-->/g, '')),
        'the page references nothing outside itself');
    const numbers = [...page.text.matchAll(/<span class="n" id="(\w+)">/g)].map((m) => m[1]);
    const withUnit = [...page.text.matchAll(/<span class="n" id="(\w+)">–<\/span><span class="u">[^<]+<\/span>/g)].map((m) => m[1]);
    check(numbers.length >= 30 && withUnit.length === numbers.length, 'every number on the page has a unit beside it',
        numbers.filter((n) => !withUnit.includes(n)).join(' '));
    check(page.headers['x-content-type-options'] === 'nosniff', 'nosniff');

    // The stats: the API key, Bearer or x-api-key, never a query parameter.
    for (const [label, path, headers] of [['no key', '/monitor/stats', {}], ['wrong key', '/monitor/stats', { authorization: 'Bearer nope' }],
        ['key in the query string', `/monitor/stats?key=${KEY}&api_key=${KEY}`, {}]]) {
        const r = await request(d.base, 'GET', path, { headers });
        check(r.status === 401 && r.json && r.json.error, `/monitor/stats with ${label}: 401`, `${r.status} ${r.text}`);
    }
    const viaHeader = await request(d.base, 'GET', '/monitor/stats', { headers: { 'x-api-key': KEY } });
    check(viaHeader.status === 200, '/monitor/stats with x-api-key: 200');
    const before = await request(d.base, 'GET', '/monitor/stats', { headers: auth });
    const s0 = before.json;
    check(before.status === 200 && before.headers['content-type'] === 'application/json' && s0, '/monitor/stats: 200 JSON', before.text);
    check(s0.model.id === 'tiny' && s0.model.synthetic_weights === true && s0.model.device === 'cpu' && s0.model.device_option === 'auto' && s0.model.state === 'ready' &&
        typeof s0.model.version === 'string', 'model: id, synthetic weights, device, state, version', JSON.stringify(s0.model));
    check(s0.lanes.total === 2 && s0.lanes.list.length === 2 && s0.lanes.list.every((l) => l.phase === 'idle' && l.tokens === 0) &&
        s0.queue.waiting_requests === 0 && s0.queue.max_pending_requests > 0, 'lanes idle, queue empty', JSON.stringify([s0.lanes, s0.queue]));
    check(s0.kv_tokens.capacity > 0 && Number.isInteger(s0.uptime_s), 'KV capacity and uptime', JSON.stringify(s0.kv_tokens));

    // A request in flight shows up on its lane.
    const stream = await client.chat.completions.create({ model: 'tiny', messages: user('Count to a thousand'), max_tokens: 1500,
        temperature: 0, stream: true });
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    await it.next();
    const busy = (await request(d.base, 'GET', '/monitor/stats', { headers: auth })).json;
    const active = busy.lanes.list.filter((l) => l.phase !== 'idle');
    check(busy.lanes.running === 1 && active.length === 1 && active[0].tokens > 0, 'a running request holds one lane with tokens',
        JSON.stringify(busy.lanes));
    stream.controller.abort();
    await waitFor(() => false, 100);

    // A finished request moves the counters; the figures equal /metrics'.
    const c = await client.chat.completions.create({ model: 'tiny', messages: user('Hello there'), max_tokens: 8, temperature: 0 });
    const s1 = (await request(d.base, 'GET', '/monitor/stats', { headers: auth })).json;
    check(s1.tokens.generated_total >= s0.tokens.generated_total + c.usage.completion_tokens &&
        s1.tokens.prompt_total >= s0.tokens.prompt_total + c.usage.prompt_tokens &&
        s1.requests.finished_total === s0.requests.finished_total + 1 && s1.requests.cancelled_total === s0.requests.cancelled_total + 1 &&
        s1.requests.chat_completions_total === s0.requests.chat_completions_total + 2 && s1.ttft_s.count === s0.ttft_s.count + 2 &&
        s1.ttft_s.mean > 0 && s1.throughput.generated_tokens_per_s > 0 && s1.throughput.prompt_tokens_per_s > 0 &&
        s1.compute_s.decode_total > 0 && s1.decode_steps_total > s0.decode_steps_total &&
        s1.http_responses_total['200'] > s0.http_responses_total['200'] && s1.http_responses_total['401'] >= 3,
    'after two requests (one cancelled): tokens, requests, TTFT, throughput and HTTP counters moved', JSON.stringify([s0, s1]));
    const m = (await request(d.base, 'GET', '/metrics', { headers: auth })).text;
    const s2 = (await request(d.base, 'GET', '/monitor/stats', { headers: auth })).json;
    const pairs = [
        ['ninfer_generation_tokens_total', s2.tokens.generated_total], ['ninfer_prefill_tokens_total', s2.tokens.prefill_total],
        ['ninfer_prompt_tokens_total', s2.tokens.prompt_total], ['ninfer_prompt_tokens_cached_total', s2.tokens.prompt_cached_total],
        ['ninfer_kv_capacity_tokens', s2.kv_tokens.capacity], ['ninfer_max_concurrency', s2.lanes.total],
        ['ninfer_prefix_cache_hits_total', s2.prefix_cache.hits_total], ['ninfer_prefix_cache_misses_total', s2.prefix_cache.misses_total],
        ['llamacpp:prompt_tokens_seconds', s2.throughput.prompt_tokens_per_s],
        ['llamacpp:predicted_tokens_seconds', s2.throughput.generated_tokens_per_s],
        ['llamacpp:n_busy_slots_per_decode', s2.throughput.busy_lanes_per_decode_step],
        ['ninfer_time_to_first_token_seconds_count', s2.ttft_s.count], ['ninfer_time_to_first_token_seconds_sum', s2.ttft_s.sum],
        ['ninfer_requests_total{outcome="finished"}', s2.requests.finished_total],
        ['ninfer_requests_total{outcome="cancelled"}', s2.requests.cancelled_total]];
    const differ = pairs.filter(([name, v]) => metric(m, name) !== v);
    check(differ.length === 0, '/monitor/stats equals /metrics on every shared figure',
        differ.map(([name, v]) => `${name}: metrics ${metric(m, name)} stats ${v}`).join('; '));

    // CORS as for every route: the configured origin only; the preflight needs no key.
    const allowed = await request(d.base, 'GET', '/monitor/stats', { headers: { ...auth, origin: 'http://app.example' } });
    const foreign = await request(d.base, 'GET', '/monitor/stats', { headers: { ...auth, origin: 'http://evil.example' } });
    const pre = await request(d.base, 'OPTIONS', '/monitor/stats', { headers: { origin: 'http://app.example',
        'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' } });
    check(allowed.headers['access-control-allow-origin'] === 'http://app.example' && !('access-control-allow-origin' in foreign.headers) &&
        pre.status === 204 && pre.headers['access-control-allow-headers'] === 'authorization', 'CORS: configured origin only, preflight',
    JSON.stringify([allowed.headers, foreign.headers, pre.headers]));

    // The page's script, with the key in the URL fragment: Bearer header, fragment dropped, numbers filled.
    const p1 = runPageScript(page.text, d.base, '#key=' + KEY);
    const live = await waitFor(() => p1.body.dataset.state === 'live' && p1.els.gen_rate.textContent !== '–', 5000);
    await waitFor(() => Number(p1.els.charts.dataset.samples) > 0, 5000); // the daemon's first sample comes after 1 s
    p1.stop();
    const f = p1.fetches[0] || { opts: { headers: {} } };
    check(live, 'page script: live after two polls', JSON.stringify([p1.body.dataset, p1.els.status.textContent]));
    const urls = p1.fetches.map((x) => x.url);
    check(p1.fetches.length >= 4 && urls[0] === '/monitor/stats' && urls[1] === '/monitor/history?after=0' &&
        urls.every((u) => /^\/monitor\/(stats|history\?after=\d+)$/.test(u)) && !urls.some((u) => u.includes(KEY)) &&
        p1.fetches.every((x) => x.opts.headers.Authorization === 'Bearer ' + KEY),
    'page script: polls /monitor/stats and /monitor/history (all, then after the last sample) with the key as a Bearer header, never in the URL',
    JSON.stringify(urls));
    check(/^M[\d.]+ [\d.]+/.test(p1.els.tput_gen.attributes.d || '') && Number(p1.els.tput_gen.dataset.points) > 0 &&
        Number(p1.els.charts.dataset.samples) > 0, 'page script: the throughput chart drew the history',
    JSON.stringify([p1.els.tput_gen.attributes, p1.els.tput_gen.dataset, p1.els.charts.dataset]));
    check(p1.replaced === '/monitor', 'page script: the key leaves the address bar', String(p1.replaced));
    const unfilled = numbers.filter((id) => id !== 'ttft_recent' && !/^[\d,]+(\.\d+)?$/.test(p1.els[id].textContent));
    if (!/^(\d+ d )?(\d+ h )?(\d+ min )?\d+ s$/.test(p1.els.uptime.textContent)) unfilled.push('uptime');
    check(unfilled.length === 0, 'page script: every number filled in',
        unfilled.map((id) => `${id}=${JSON.stringify(p1.els[id].textContent)}`).join(' '));
    const shown = (id) => Number(p1.els[id].textContent.replace(/,/g, ''));
    const s3 = (await request(d.base, 'GET', '/monitor/stats', { headers: auth })).json;
    check(p1.els.model_id.textContent === 'tiny' && /synthetic/.test(p1.els.weights.textContent) &&
        shown('tok_generated') === s3.tokens.generated_total && shown('lanes_total') === 2 && p1.els.lanes.children.length === 2 &&
        shown('cache_hits') === s3.prefix_cache.hits_total && shown('ttft_count') === s3.ttft_s.count &&
        Math.abs(shown('ttft_mean') - Math.round(1000 * s3.ttft_s.mean)) <= 1, 'page script: the shown numbers are the stats',
    JSON.stringify(Object.fromEntries(numbers.map((id) => [id, p1.els[id].textContent]))));

    // Without a key the page asks for one; the form's key is then used.
    const p2 = runPageScript(page.text, d.base, '');
    const asked = await waitFor(() => p2.body.dataset.state === 'unauthorized', 3000);
    check(asked && p2.els.auth.hidden === false, 'page script: a 401 shows the key form', JSON.stringify(p2.body.dataset));
    p2.els.auth_key.value = KEY;
    p2.els.auth.listeners.submit({ preventDefault() {} });
    const afterForm = await waitFor(() => p2.body.dataset.state === 'live', 3000);
    p2.stop();
    check(afterForm && p2.els.auth.hidden === true && p2.els.auth_key.value === '', 'page script: the form key unlocks the stats');

    // The real browser, when there is one.
    let chromium = '';
    try { chromium = execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim(); } catch (_) { /* none */ }
    if (!chromium) {
        console.log('skip headless Chromium check: chromium is not installed (the page script ran against a stub DOM above)');
    } else {
        const dom = execFileSync(chromium, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
            `--user-data-dir=${TEST_DIR}/chromium-profile`, // its own: a parallel Chromium never shares it
            '--virtual-time-budget=5000', '--dump-dom', `${d.base}/monitor#key=${KEY}`],
        { encoding: 'utf8', timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] }); // its D-Bus complaints stay out of the log
        check(/<body data-state="live"/.test(dom) && /id="model_id">tiny</.test(dom) && /id="tok_generated">[\d,]+</.test(dom) &&
            /id="kv_capacity">[\d,]+</.test(dom), 'Chromium: the page script ran under its CSP and filled the numbers', dom.slice(0, 3000));
    }
    await d.stop();
});
