// ninfer black-box test - ninferd --speculative on the CPU backend over HTTP: greedy replies with
// mtp:3 and ngram:3 equal those with speculation off (chat and completions), a request lowers it
// ("speculative": "off" or {"type", "k"}) and never raises it (400 in each API's shape, like a
// malformed value), /metrics carries vLLM's spec_decode counters, each reply's llama.cpp timings
// its draft_n / draft_n_accepted, and the start is refused for mtp:K without an MTP head, for any
// value on the script backend (no draft or verify) and for values outside the option's list.
'use strict';
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { main, check, request, TEST_DIR } = require('./harness');

const MTP = process.env.NINFER_MTP_ARTIFACT;
const prompts = ['Once upon a time', 'The quick brown fox jumps over the lazy dog. The quick brown fox'];

async function chat(d, content, extra = {}) {
    return request(d.base, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json' },
        body: { model: 'mtp', messages: [{ role: 'user', content }], temperature: 0, max_tokens: 24, ...extra } });
}
async function complete(d, prompt, extra = {}) {
    return request(d.base, 'POST', '/v1/completions', { headers: { 'content-type': 'application/json' },
        body: { model: 'mtp', prompt, temperature: 0, max_tokens: 24, ...extra } });
}
const textOf = (r) => (r.json.choices[0].message ? JSON.stringify(r.json.choices[0].message) : r.json.choices[0].text);

async function replies(d, extra = {}) {
    const out = [];
    for (const p of prompts) out.push(await chat(d, p, extra), await complete(d, p, extra));
    return out;
}

function metric(text, name) {
    const m = text.match(new RegExp('^' + name.replace(/[{}"]/g, '\\$&') + ' (\\d+)$', 'm'));
    return m ? Number(m[1]) : null;
}

main('speculative', async (start) => {
    const empty = path.join(TEST_DIR, 'spec.conf');
    fs.writeFileSync(empty, '');
    const run = (args) => spawnSync(process.env.NINFERD, ['--config', empty, ...args], { encoding: 'utf8', timeout: 120000 });
    const noHead = run(['--artifact', process.env.NINFER_TINY_ARTIFACT, '--speculative', 'mtp:3', '--port', '0']);
    check(noHead.status === 1 && /speculative mtp:3 needs the artifact's MTP head/.test(noHead.stderr),
        'mtp:K on an artifact without an MTP head: refused at start', noHead.stderr.slice(-300));
    const script = run(['--artifact', MTP, '--device', 'script:' + path.join(TEST_DIR, 'none.txt'), '--speculative', 'ngram:2',
        '--port', '0']);
    check(script.status === 1 && /needs draft and verify steps, which the script backend does not have/.test(script.stderr),
        'ngram:K on the script backend: refused at start', script.stderr.slice(-300));
    for (const bad of ['mtp:6', 'mtp', 'eagle:2']) {
        const r = run(['--artifact', MTP, '--speculative', bad]);
        check(r.status === 2 && /option 'speculative' must be one of/.test(r.stderr), `--speculative ${bad}: exit 2 naming the option`,
            r.stderr);
    }
    const cheq = run(['--artifact', MTP, '--speculative', 'mtp:3', '--check-config']);
    check(cheq.status === 0 && /^speculative = mtp:3$/m.test(cheq.stdout) && /verify snapshots/.test(cheq.stdout),
        '--check-config plans the verify window', cheq.stdout + cheq.stderr);
    // The default, auto: mtp:3 only on the CUDA backend (daemon/model_loader.h resolve_speculative).
    const autoCfg = run(['--artifact', MTP, '--check-config']);
    check(autoCfg.status === 0 && /^speculative = auto$/m.test(autoCfg.stdout) &&
        /^# speculative auto: off \(the cpu backend: --speculative mtp:K or ngram:K turns it on\)$/m.test(autoCfg.stdout) &&
        !/verify snapshots/.test(autoCfg.stdout), '--check-config: auto is off on the CPU backend, nothing planned for it',
        autoCfg.stdout + autoCfg.stderr);

    const sock = path.join(TEST_DIR, 'spec-ctl.sock');
    const art = ['--artifact', MTP, '--max-concurrency', '2', '--control-socket', sock];
    const ctl = path.join(path.dirname(process.env.NINFERD), '..', 'ctl', 'ninferctl');
    const plain = await start([...art]);
    const want = await replies(plain);
    check(want.every((r) => r.status === 200 && r.json.timings.draft_n === 0), 'off: 200s, draft_n 0');
    const offMetrics = (await request(plain.base, 'GET', '/metrics')).text;
    check(metric(offMetrics, 'ninfer_spec_decode_num_draft_tokens_total') === 0 &&
        !/num_accepted_tokens_per_pos\{/.test(offMetrics), 'off: counters at 0, no positions');
    const raise = await chat(plain, prompts[0], { speculative: { type: 'ngram', k: 1 } });
    check(raise.status === 400 && raise.json.error.param === 'speculative', 'off: a request cannot turn it on', JSON.stringify(raise.json));
    await plain.stop();

    for (const setting of ['mtp:3', 'ngram:3']) {
        const d = await start([...art, '--speculative', setting]);
        const got = await replies(d);
        check(got.every((r, i) => r.status === 200 && textOf(r) === textOf(want[i])),
            `${setting}: greedy replies equal those without speculation`, JSON.stringify(got.map((r) => r.json).slice(0, 1)));
        const drafted = got.reduce((n, r) => n + r.json.timings.draft_n, 0);
        check(got.every((r) => r.json.timings.draft_n_accepted <= r.json.timings.draft_n), `${setting}: draft_n_accepted <= draft_n`);
        if (setting.startsWith('mtp')) check(drafted > 0, `${setting}: timings.draft_n counts the head's drafts`, String(drafted));
        const m = (await request(d.base, 'GET', '/metrics')).text;
        check(metric(m, 'ninfer_spec_decode_num_draft_tokens_total') === drafted &&
            metric(m, 'ninfer_spec_decode_num_accepted_tokens_total') !== null &&
            metric(m, 'ninfer_spec_decode_num_accepted_tokens_per_pos{position="2"}') !== null &&
            metric(m, 'ninfer_spec_decode_num_accepted_tokens_per_pos{position="3"}') === null,
            `${setting}: /metrics spec_decode counters (draft tokens = the replies' draft_n, positions 0..2)`,
            m.split('\n').filter((l) => l.includes('spec_decode')).join('\n'));

        const st = spawnSync(ctl, ['--socket', sock, 'status'], { encoding: 'utf8' });
        check(st.status === 0 && new RegExp(`^speculative ${setting}: \\d+ rounds, ${drafted} drafted, \\d+ accepted`, 'm').test(st.stdout),
            `${setting}: ninferctl status shows the acceptance`, st.stdout + st.stderr);
        if (setting.startsWith('mtp')) {
            const off = await chat(d, prompts[0], { speculative: 'off' });
            check(off.status === 200 && off.json.timings.draft_n === 0 && textOf(off) === textOf(want[0]),
                'a request turns it off', JSON.stringify(off.json.timings));
            for (const lower of [{ type: 'mtp', k: 1 }, { type: 'ngram', k: 2 }, 'mtp:2', { type: 'off' }]) {
                const r = await chat(d, prompts[0], { speculative: lower });
                check(r.status === 200 && textOf(r) === textOf(want[0]), `a request lowers it: ${JSON.stringify(lower)}`,
                    JSON.stringify(r.json));
            }
            const bads = [{ type: 'mtp', k: 4 }, { type: 'mtp', k: 0 }, { type: 'mtp' }, 'mtp:9', 'bogus', 3, { type: 'eagle', k: 1 }];
            for (const bad of bads) {
                const r = await chat(d, prompts[0], { speculative: bad });
                check(r.status === 400 && r.json.error && r.json.error.type === 'invalid_request_error' &&
                    r.json.error.param === 'speculative', `chat: speculative ${JSON.stringify(bad)} -> 400`, JSON.stringify(r.json));
            }
            const c = await complete(d, prompts[0], { speculative: { type: 'mtp', k: 5 } });
            check(c.status === 400 && c.json.error.param === 'speculative', 'completions: raising -> 400');
            const resp = await request(d.base, 'POST', '/v1/responses', { headers: { 'content-type': 'application/json' },
                body: { model: 'mtp', input: 'hi', max_output_tokens: 8, speculative: 'ngram:7' } });
            check(resp.status === 400 && resp.json.error && resp.json.error.param === 'speculative', 'responses: bad value -> 400',
                JSON.stringify(resp.json));
            const an = await request(d.base, 'POST', '/v1/messages', { headers: { 'content-type': 'application/json' },
                body: { model: 'mtp', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }], speculative: { type: 'mtp', k: 4 } } });
            check(an.status === 400 && an.json.type === 'error' && an.json.error.type === 'invalid_request_error',
                'anthropic: raising -> 400 in its shape', JSON.stringify(an.json));
            const ok = await request(d.base, 'POST', '/v1/messages', { headers: { 'content-type': 'application/json' },
                body: { model: 'mtp', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }], speculative: 'off' } });
            check(ok.status === 200, 'anthropic: a request turns it off', JSON.stringify(ok.json));
        }
        await d.stop();
    }
});
