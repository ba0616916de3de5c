// ninfer black-box soak - ninferd on the CPU backend under a mixed load for a set time: streaming chats,
// streams cancelled mid-way, bad requests (each must get a 4xx), Anthropic and Responses calls,
// /metrics and /health polls, and control operations through ninferctl (status, metrics, slot
// save / restore / list / erase, cache list). Samples RSS and open fds every NINFER_SOAK_SAMPLE_S and
// checks at the end: no unexpected error, RSS growth after the warm-up <= NINFER_SOAK_RSS_MIB,
// the fd count back to its idle value once clients are gone, no request left in the engine.
// Env: NINFER_SOAK_SECONDS (600), NINFER_SOAK_STREAMS (8 streaming clients), NINFER_SOAK_WARMUP_S
// (a fifth of the run, at most 300), NINFER_SOAK_RSS_MIB (8), NINFER_SOAK_SAMPLE_S (10).
'use strict';
const { execFile } = require('child_process');
const fs = require('fs');
const path = require('path');
const http = require('http');
const { main, check, request, rssKiB, sleep, user, TEST_DIR } = require('./harness');

const SECONDS = Number(process.env.NINFER_SOAK_SECONDS || 600);
const STREAMS = Number(process.env.NINFER_SOAK_STREAMS || 8);
const WARMUP_S = Number(process.env.NINFER_SOAK_WARMUP_S || Math.min(300, SECONDS / 5));
const RSS_MIB = Number(process.env.NINFER_SOAK_RSS_MIB || 8);
const SAMPLE_S = Number(process.env.NINFER_SOAK_SAMPLE_S || 10);
const CTL = path.join(process.env.NINFER_BIN, 'ctl/ninferctl');

const fdCount = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;
const ctl = (socket, args) => new Promise((resolve) => {
    execFile(CTL, ['--socket', socket, '--timeout', '30', ...args], { timeout: 60000 }, (err, stdout, stderr) =>
        resolve({ code: err ? (err.code ?? -1) : 0, out: stdout + stderr }));
});

// Bodies every API must refuse with a 4xx (never a 5xx, never a hang).
const BAD = [
    ['/v1/chat/completions', '{"model":"tiny","messages":'],
    ['/v1/chat/completions', '{"model":"tiny","messages":[{"role":"robot","content":"x"}]}'],
    ['/v1/chat/completions', '{"model":"tiny","messages":[{"role":"user","content":"x"}],"max_tokens":-1}'],
    ['/v1/chat/completions', '{"model":"tiny","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]}'],
    ['/v1/messages', '{"model":"c","messages":[{"content":"x"}],"max_tokens":4}'],
    ['/v1/messages', '{"model":"c","messages":[{"role":"user","content":[{"type":"tool_result"}]}],"max_tokens":4}'],
    ['/v1/responses', '{"model":"tiny","input":[{"type":"function_call_output"}]}'],
    ['/v1/completions', '{"model":"tiny","prompt":{}}'],
    ['/nope', ''],
];

main('soak', async (start) => {
    const socket = path.join(TEST_DIR, 'soak-ctl.sock');
    const d = await start(['--max-concurrency', '4', '--max-pending', '256', '--host-cache-mib', '16',
        '--control-socket', socket, '--state-dir', path.join(TEST_DIR, 'state'), '--idle-timeout-s', '10']);
    const pid = d.proc.pid;
    const client = d.client();
    const counts = { streams: 0, tokens: 0, cancelled: 0, bad: 0, other: 0, ctl: 0 };
    const errors = [];
    const fail = (what) => { if (errors.length < 20) console.log('error: ' + what); errors.push(what); };
    await sleep(500);
    const fdIdle = fdCount(pid);
    const t0 = Date.now();
    const deadline = t0 + SECONDS * 1000;
    const running = () => Date.now() < deadline;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

    const streamer = async (w) => {
        for (let i = 0; running(); ++i) {
            try {
                const s = await client.chat.completions.create({ model: 'tiny', messages: user(`soak ${w} ${i}`),
                    max_tokens: 8 + (i % 24), stream: true, stream_options: { include_usage: true }, temperature: 0.7 });
                for await (const c of s) if (c.usage) counts.tokens += c.usage.completion_tokens;
                counts.streams++;
            } catch (e) { fail(`stream ${w}: ${e}`); }
        }
    };
    const canceller = async () => {
        for (let i = 0; running(); ++i) {
            const ac = new AbortController();
            try {
                const s = await client.chat.completions.create({ model: 'tiny', messages: user(`cancel ${i}`), max_tokens: 200,
                    stream: true }, { signal: ac.signal });
                let n = 0;
                for await (const _ of s) if (++n === 1 + (i % 3)) ac.abort();
            } catch (e) {
                if (!ac.signal.aborted) fail(`cancel: ${e}`);
            }
            counts.cancelled++;
        }
    };
    const badClient = async () => {
        for (let i = 0; running(); ++i) {
            const [url, body] = BAD[i % BAD.length];
            const r = await request(d.base, 'POST', url, { body, agent, headers: { 'content-type': 'application/json' } });
            if (r.status < 400 || r.status >= 500) fail(`bad request ${url} ${body} -> ${r.status}`);
            counts.bad++;
            await sleep(20);
        }
    };
    const otherApis = async () => {
        for (let i = 0; running(); ++i) {
            const calls = [
                ['POST', '/v1/messages', { model: 'c', max_tokens: 6, messages: [{ role: 'user', content: `hi ${i}` }] }],
                ['POST', '/v1/responses', { model: 'tiny', input: `hello ${i}`, max_output_tokens: 6, store: false }],
                ['POST', '/v1/completions', { model: 'tiny', prompt: `once ${i}`, max_tokens: 6 }],
                ['GET', '/metrics'], ['GET', '/health'], ['GET', '/v1/models'],
            ];
            const [method, url, body] = calls[i % calls.length];
            const r = await request(d.base, method, url, { body, agent });
            if (r.status !== 200) fail(`${method} ${url} -> ${r.status} ${r.text.slice(0, 200)}`);
            counts.other++;
        }
    };
    const controller = async () => {
        for (let i = 0; running(); ++i) {
            const ops = [['status'], ['metrics'], ['slot', 'save', String(i % 4), `soak${i % 3}`], ['slot', 'list'],
                ['cache', 'list'], ['slot', 'restore', String((i + 1) % 4), `soak${i % 3}`], ['slot', 'erase', String((i + 2) % 4)]];
            const op = ops[i % ops.length];
            const r = await ctl(socket, op);
            // A lane in use answers busy, an empty lane empty, a name not saved yet not found: answers.
            if (r.code !== 0 && !/busy|is empty|no saved slot|not found/i.test(r.out)) fail(`ninferctl ${op.join(' ')} -> ${r.code}: ${r.out.trim()}`);
            counts.ctl++;
            await sleep(200);
        }
    };
    const samples = [];
    const sampler = async () => {
        while (running()) {
            await sleep(SAMPLE_S * 1000);
            const s = { t: Math.round((Date.now() - t0) / 1000), rss: rssKiB(pid), fds: fdCount(pid) };
            samples.push(s);
            console.log(`sample: t=${s.t} s rss=${s.rss} KiB fds=${s.fds} streams=${counts.streams} tokens=${counts.tokens} ` +
                `cancelled=${counts.cancelled} bad=${counts.bad} other=${counts.other} ctl=${counts.ctl} errors=${errors.length}`);
        }
    };
    await Promise.all([...[...Array(STREAMS)].map((_, w) => streamer(w)), canceller(), badClient(), otherApis(), controller(), sampler()]);
    agent.destroy();
    // Clients' idle keep-alive connections close after --idle-timeout-s 10 (shorter idle timeouts
    // make a client that reuses a connection as the server closes it see a reset: 4 in 390 s at 2 s).
    await sleep(11500);
    const fdEnd = fdCount(pid), rssEnd = rssKiB(pid);
    const afterWarmup = samples.filter((s) => s.t >= WARMUP_S);
    const rssBase = afterWarmup.length ? afterWarmup[0].rss : rssEnd;
    const rssMax = Math.max(rssEnd, ...afterWarmup.map((s) => s.rss));
    console.log(`figures: ${SECONDS} s, ${STREAMS} streaming clients: ${counts.streams} streams (${counts.tokens} tokens), ` +
        `${counts.cancelled} cancelled, ${counts.bad} bad requests, ${counts.other} other API calls, ${counts.ctl} control ops, ` +
        `${errors.length} errors; RSS ${rssBase} KiB at ${WARMUP_S} s -> max ${rssMax} KiB, end ${rssEnd} KiB ` +
        `(growth ${rssMax - rssBase} KiB); fds idle ${fdIdle} -> end ${fdEnd}`);
    check(errors.length === 0, 'no unexpected error', errors.slice(0, 3).join(' | '));
    check(counts.streams > 0 && counts.cancelled > 0 && counts.bad > 0 && counts.ctl > 0, 'every kind of load ran');
    check(rssMax - rssBase <= RSS_MIB * 1024, `RSS growth after ${WARMUP_S} s <= ${RSS_MIB} MiB`, `${rssBase} -> ${rssMax} KiB`);
    check(fdEnd <= fdIdle + 2, 'open fds back to their idle count', `${fdIdle} -> ${fdEnd}`);
    const m = await request(d.base, 'GET', '/metrics');
    check(/^ninfer_requests_running 0$/m.test(m.text) && /^ninfer_requests_waiting 0$/m.test(m.text), 'no request left behind');
    const peak = m.text.match(/^ninfer_process_resident_peak_bytes (\d+)/m);
    if (peak) console.log(`figures: peak RSS (VmHWM, /metrics) ${(Number(peak[1]) / 1048576).toFixed(1)} MiB`);
    await d.stop();
});
