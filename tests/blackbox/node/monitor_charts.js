// ninfer black-box test - /monitor's history charts in headless Chromium: the daemon's
// /monitor/history before and after some seconds of streaming load (its rates add up to the tokens
// /monitor/stats counted), the charts empty before the load (the assertion below can fail) and
// holding data after it (each line's points, its largest value, its SVG path commands), and a
// screenshot kept at $NINFER_BIN/test-artifacts/monitor_charts.png (the log prints the path).
// Needs `chromium` ($NINFER_CHROMIUM overrides; test_monitor_charts.sh handles its absence).
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { main, check, request, sleep, user, TEST_DIR } = require('./harness');

const KEY = 'sekrit';
const auth = { authorization: 'Bearer ' + KEY };
const CHROMIUM = process.env.NINFER_CHROMIUM || 'chromium';
const LOAD_MS = 6000;
const LINES = ['tput_gen', 'tput_prompt', 'itl_p50', 'itl_p99', 'ttft_p50', 'ttft_p99', 'lanes_run', 'lanes_pre', 'lanes_wait', 'kv_use',
    'host_cache_use'];

// Each run has its own profile under the test's directory: another Chromium (test_monitor's, a
// parallel ctest) never shares it, and $HOME need not be writable.
function browser(args, url) {
    return execFileSync(CHROMIUM, ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
        `--user-data-dir=${path.join(TEST_DIR, 'chromium-profile')}`,
        '--hide-scrollbars', '--virtual-time-budget=4000', ...args, url], { encoding: 'utf8', timeout: 90000, stdio: ['ignore', 'pipe', 'pipe'] });
}

// What the page drew, read from the DOM Chromium dumps: per line, its points and largest value (the
// page's data attributes) and the number of M/L commands in its SVG path.
function chartsOf(dom) {
    const section = dom.match(/<section id="charts" data-samples="(\d+)"/);
    const lines = {};
    for (const id of LINES) {
        const tag = (dom.match(new RegExp(`<path id="${id}"[^>]*>`)) || [''])[0];
        const attr = (name) => (tag.match(new RegExp(`\\s${name}="([^"]*)"`)) || [])[1];
        lines[id] = { points: Number(attr('data-points') || 0), max: Number(attr('data-max') || 0),
            commands: ((attr('d') || '').match(/[ML]/g) || []).length };
    }
    return { samples: section ? Number(section[1]) : 0, lines, live: /<body data-state="live"/.test(dom) };
}

const history = async (d, after = 0) => (await request(d.base, 'GET', `/monitor/history?after=${after}`, { headers: auth })).json;

async function waitForSamples(d, n) {
    const deadline = Date.now() + 10000;
    while ((await history(d)).samples.length < n && Date.now() < deadline) await sleep(100);
}

main('monitor_charts', async (start) => {
    const d = await start(['--api-key', KEY, '--max-concurrency', '2']);
    const url = `${d.base}/monitor#key=${KEY}`;

    // The endpoint: the API key, a bad after=, the sample fields.
    const noKey = await request(d.base, 'GET', '/monitor/history', {});
    check(noKey.status === 401, '/monitor/history without the key: 401', String(noKey.status));
    const bad = await request(d.base, 'GET', '/monitor/history?after=-1', { headers: auth });
    check(bad.status === 400 && bad.json && bad.json.error.param === 'after', '/monitor/history?after=-1: 400 naming after', bad.text);
    await waitForSamples(d, 2);
    const idle = await history(d);
    check(idle.period_s === 1 && idle.capacity === 300 && idle.samples.length >= 2 && idle.last_seq === idle.samples.at(-1).seq,
        'history while idle: one sample a second, 300 kept', JSON.stringify(idle).slice(0, 500));
    check(idle.samples.every((s) => s.generated_tokens_per_s === 0 && s.itl_p50_s === null && s.lanes_running === 0 && s.lanes_total === 2),
        'idle samples: no tokens, no latency (null), no lane busy', JSON.stringify(idle.samples.at(-1)));

    // Before any load the charts hold nothing: the check made after the load is false here.
    const holdsData = (c) => c.live && c.samples > 0 && ['tput_gen', 'itl_p50', 'itl_p99', 'ttft_p50', 'lanes_run', 'kv_use', 'host_cache_use']
        .every((id) => c.lines[id].points > 0 && c.lines[id].max > 0 && c.lines[id].commands === c.lines[id].points);
    const empty = chartsOf(browser(['--dump-dom'], url));
    check(empty.live && empty.samples >= 2 && empty.lines.tput_gen.points === empty.samples && empty.lines.tput_gen.max === 0 &&
        empty.lines.itl_p50.points === 0 && empty.lines.ttft_p50.points === 0 && !holdsData(empty),
    'Chromium before load: the charts are drawn from the history but hold no data', JSON.stringify(empty));

    // Load: three clients, short streaming replies back to back for LOAD_MS (two lanes, one queued).
    const client = d.client({ apiKey: KEY });
    const stop = Date.now() + LOAD_MS;
    let replies = 0;
    await Promise.all([0, 1, 2].map(async (w) => {
        for (let i = 0; Date.now() < stop; i++) {
            const s = await client.chat.completions.create({ model: 'tiny', messages: user(`chart load ${w}.${i}`), max_tokens: 48,
                temperature: 0, stream: true });
            for await (const _ of s) { /* drain */ }
            replies++;
        }
    }));
    const stats = (await request(d.base, 'GET', '/monitor/stats', { headers: auth })).json;
    const seqAfterLoad = (await history(d)).last_seq;
    await waitForSamples(d, (await history(d)).samples.length + 2); // a sample taken after the last token
    const h = await history(d);
    const busy = h.samples.filter((s) => s.generated_tokens_per_s > 0);
    const sum = h.samples.reduce((a, s) => a + s.generated_tokens_per_s * s.interval_s, 0);
    check(busy.length >= 3 && busy.some((s) => s.lanes_running > 0 && s.kv_reserved_tokens > 0 && s.itl_p50_s > 0 && s.ttft_p50_s > 0),
        `history after ${replies} replies: samples with tokens, busy lanes, KV reserved, latency percentiles`,
        JSON.stringify(busy.slice(0, 3)));
    // Replies end with a checkpoint into the prefix cache (host memory, --host-cache-mib).
    check(h.samples.some((s) => s.host_cache_used_bytes > 0 && s.host_cache_used_bytes <= s.host_cache_budget_bytes),
        'history: the prefix cache holds snapshots within its budget', JSON.stringify(h.samples.at(-1)));
    check(Math.abs(sum - stats.tokens.generated_total) <= 2 + 0.01 * stats.tokens.generated_total,
        'history: the rates times their intervals add up to the tokens generated', `${sum} vs ${stats.tokens.generated_total}`);
    check(h.samples.every((s) => s.itl_p50_s === null || (s.itl_p50_s <= s.itl_p99_s && s.itl_p99_s > 0)) &&
        h.samples.every((s) => s.ttft_p50_s === null || s.ttft_p50_s <= s.ttft_p99_s), 'history: p50 <= p99');
    const tail = await history(d, seqAfterLoad);
    check(tail.samples.length >= 1 && tail.samples.every((s) => s.seq > seqAfterLoad), 'after=SEQ: only the later samples',
        JSON.stringify(tail.samples.map((s) => s.seq)));

    // A fresh page (as after a reload) draws the last minutes at once.
    const full = chartsOf(browser(['--dump-dom'], url));
    check(holdsData(full), 'Chromium after load: throughput, latency, lanes and KV charts hold data', JSON.stringify(full));
    check(full.lines.tput_gen.max > 0 && full.lines.lanes_run.max <= 2 && full.lines.kv_use.max <= 100 &&
        full.lines.host_cache_use.max <= 100,
        'Chromium after load: values within their bounds (2 lanes, KV at most 100 %)', JSON.stringify(full.lines));

    const dir = path.join(process.env.NINFER_BIN || '.', 'test-artifacts');
    fs.mkdirSync(dir, { recursive: true });
    const shot = path.join(dir, 'monitor_charts.png');
    fs.rmSync(shot, { force: true });
    browser(['--window-size=1280,1300', `--screenshot=${shot}`], url);
    const png = fs.existsSync(shot) ? fs.readFileSync(shot) : Buffer.alloc(0);
    check(png.length > 0 && png.subarray(1, 4).toString() === 'PNG', `screenshot kept: ${shot}`, `${png.length} bytes`);
    await d.stop();
});
