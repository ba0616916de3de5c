// ninfer black-box test - scheduling through the SDK: 8 parallel greedy streams equal their solo
// runs, a client that disconnects frees its lane, a full queue answers 429, a queue wait past
// pending-timeout-ms answers 503.
'use strict';
const OpenAI = require('openai');
const { main, check, request, user, sleep } = require('./harness');

async function streamText(client, params, { onChunk } = {}) {
    const stream = await client.chat.completions.create({ ...params, stream: true });
    let text = '';
    let n = 0;
    for await (const chunk of stream) {
        for (const c of chunk.choices) text += (c.delta.content || '') + (c.delta.reasoning_content || '');
        if (onChunk && onChunk(++n, stream)) break;
    }
    return text;
}

function metric(text, name) {
    const m = text.match(new RegExp('^' + name.replace(/[{}"]/g, (c) => '\\' + c) + ' ([0-9.e+-]+)$', 'm'));
    return m ? Number(m[1]) : NaN;
}

main('concurrency', async (start) => {
    const d = await start(['--max-concurrency', '8', '--prefill-chunk', '32']);
    const client = d.client();
    const params = (i) => ({ model: 'tiny', messages: user(`Request number ${i}: ${'tell me more '.repeat(i + 1)}`),
        temperature: 0, max_tokens: 20 + i });
    const solo = [];
    for (let i = 0; i < 8; i++) solo.push(await streamText(client, params(i)));
    const together = await Promise.all([...Array(8).keys()].map((i) => streamText(client, params(i))));
    const same = together.map((t, i) => t === solo[i]);
    check(same.every(Boolean), '8 parallel greedy streams equal their solo runs', JSON.stringify(same));
    const m = (await request(d.base, 'GET', '/metrics')).text;
    check(metric(m, 'llamacpp:n_busy_slots_per_decode') > 1, 'decode steps were batched',
        String(metric(m, 'llamacpp:n_busy_slots_per_decode')));
    await d.stop();

    // One lane: a disconnected stream must give its lane to the next request at once.
    const one = await start(['--max-concurrency', '1']);
    const c1 = one.client();
    const long = { model: 'tiny', messages: user('go on forever'), temperature: 0, max_tokens: 1900,
        chat_template_kwargs: { enable_thinking: false } };
    await streamText(c1, long, { onChunk: (n, s) => { if (n >= 3) { s.controller.abort(); return true; } return false; } });
    const t0 = Date.now();
    const next = await c1.chat.completions.create({ ...long, max_tokens: 3 });
    const waited = Date.now() - t0;
    check(next.usage.completion_tokens === 3, 'the next request ran after the disconnect');
    const m1 = (await request(one.base, 'GET', '/metrics')).text;
    check(metric(m1, 'ninfer_requests_total{outcome="cancelled"}') === 1 && metric(m1, 'ninfer_client_disconnects_total') === 1,
        'the disconnected request was cancelled', m1.match(/^ninfer_requests_total.*$/gm).join(' '));
    check(metric(m1, 'ninfer_generation_tokens_total') < 200, 'the cancelled request stopped decoding',
        `${metric(m1, 'ninfer_generation_tokens_total')} tokens generated, next request waited ${waited} ms`);
    await one.stop();

    // Queue full -> 429; queue wait over pending-timeout-ms -> 503.
    const full = await start(['--max-concurrency', '1', '--max-pending', '0']);
    let busy;
    const started = new Promise((resolve) => {
        busy = streamText(full.client(), long, { onChunk: (n, s) => { if (n === 1) resolve(); if (n >= 40) { s.controller.abort(); return true; } return false; } });
    });
    await started;
    const e429 = await full.client().chat.completions.create({ ...long, max_tokens: 2 }).catch((e) => e);
    check(e429 instanceof OpenAI.APIError && e429.status === 429 && e429.code === 'server_overloaded', 'queue full: 429 server_overloaded',
        e429 && `${e429.status} ${e429.code}`);
    await busy;
    await full.stop();

    const slow = await start(['--max-concurrency', '1', '--pending-timeout-ms', '300']);
    let busy2;
    const started2 = new Promise((resolve) => {
        busy2 = streamText(slow.client(), long, { onChunk: (n, s) => { if (n === 1) resolve(); if (n >= 100) { s.controller.abort(); return true; } return false; } });
    });
    await started2;
    const t1 = Date.now();
    const e503 = await slow.client().chat.completions.create({ ...long, max_tokens: 2 }).catch((e) => e);
    check(e503 instanceof OpenAI.APIError && e503.status === 503 && e503.code === 'request_queue_timeout',
        'queue wait past pending-timeout-ms: 503 request_queue_timeout', e503 && `${e503.status} ${e503.code} after ${Date.now() - t1} ms`);
    await busy2;
    await slow.stop();
});
