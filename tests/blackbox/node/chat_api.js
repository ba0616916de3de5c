// ninfer black-box test - the OpenAI Chat Completions surface through the official `openai` SDK:
// non-streaming and streaming results agree, usage chunk, thinking switches, stop, limits,
// logprobs, seeds, models, metrics, every error shape, and the API key.
'use strict';
const { spawnSync } = require('child_process');
const OpenAI = require('openai');
const { main, check, request, user } = require('./harness');

async function collectStream(client, params) {
    const stream = await client.chat.completions.create({ ...params, stream: true });
    const out = { content: '', reasoning: '', chunks: [], finish: null, usage: null };
    for await (const chunk of stream) {
        out.chunks.push(chunk);
        if (chunk.usage) out.usage = chunk.usage;
        for (const c of chunk.choices) {
            out.content += c.delta.content || '';
            out.reasoning += c.delta.reasoning_content || '';
            if (c.finish_reason) out.finish = c.finish_reason;
        }
    }
    return out;
}

async function errorOf(promise) {
    try { await promise; } catch (e) { return e; }
    return null;
}

main('chat_api', async (start) => {
    const d = await start(['--max-body-mib', '1']);
    const client = d.client();
    const base = { model: 'tiny', messages: user('Tell me a story.'), temperature: 0, max_tokens: 24 };

    const models = await client.models.list();
    check(models.data.length === 1 && models.data[0].id === 'tiny', 'models.list names the artifact', JSON.stringify(models.data));

    const full = await client.chat.completions.create(base);
    const m = full.choices[0].message;
    check(/^chatcmpl-[0-9a-f]{16}$/.test(full.id) && full.object === 'chat.completion', 'completion id and object');
    check(full.usage.completion_tokens === 24 && full.choices[0].finish_reason === 'length', 'max_tokens reached: length',
        JSON.stringify(full.usage));
    check(full.usage.total_tokens === full.usage.prompt_tokens + 24, 'usage adds up');
    check(full.usage.prompt_tokens_details && full.usage.prompt_tokens_details.cached_tokens === 0, 'cached_tokens present');
    check(full.timings && full.timings.predicted_n === 24 && full.timings.prompt_n > 0, 'llama.cpp timings', JSON.stringify(full.timings));
    check((m.reasoning_content || '').length > 0, 'thinking on by default: reasoning_content');

    const streamed = await collectStream(client, { ...base, stream_options: { include_usage: true } });
    check(streamed.reasoning === (m.reasoning_content || '') && streamed.content === (m.content || ''),
        'streamed text equals the non-streamed text', JSON.stringify([streamed.reasoning, m.reasoning_content]));
    check(streamed.finish === 'length', 'streamed finish_reason');
    const last = streamed.chunks[streamed.chunks.length - 1];
    check(last.choices.length === 0 && last.usage && last.usage.completion_tokens === 24, 'usage chunk last, choices []');
    check(streamed.chunks.slice(0, -1).every((c) => c.usage === null), 'other chunks carry usage: null');
    check(streamed.chunks[0].choices[0].delta.role === 'assistant', 'first chunk carries the role');

    const noUsage = await collectStream(client, base);
    check(noUsage.usage === null && noUsage.chunks.every((c) => c.choices.length === 1), 'no usage chunk unless asked');

    for (const [label, extra] of [['chat_template_kwargs.enable_thinking=false', { chat_template_kwargs: { enable_thinking: false } }],
                                  ['reasoning_effort none', { reasoning_effort: 'none' }]]) {
        const r = await client.chat.completions.create({ ...base, ...extra });
        check(!r.choices[0].message.reasoning_content && r.choices[0].message.content.length > 0, label + ' turns thinking off');
    }

    const off = { ...base, chat_template_kwargs: { enable_thinking: false }, max_tokens: 40 };
    const plain = (await client.chat.completions.create(off)).choices[0].message.content;
    const stopAt = plain.slice(Math.floor(plain.length / 2), Math.floor(plain.length / 2) + 3);
    if (stopAt.trim().length > 0) {
        const stopped = await client.chat.completions.create({ ...off, stop: [stopAt] });
        check(stopped.choices[0].finish_reason === 'stop' && plain.startsWith(stopped.choices[0].message.content) &&
            !stopped.choices[0].message.content.includes(stopAt), 'stop string ends the output before it',
            JSON.stringify([stopAt, stopped.choices[0].message.content]));
        const stoppedStream = await collectStream(client, { ...off, stop: stopAt });
        check(stoppedStream.content === stopped.choices[0].message.content && stoppedStream.finish === 'stop', 'stop when streaming');
    }
    const mct = await client.chat.completions.create({ ...off, max_tokens: undefined, max_completion_tokens: 5 });
    check(mct.usage.completion_tokens === 5, 'max_completion_tokens');

    const lp = await client.chat.completions.create({ ...off, max_tokens: 6, logprobs: true, top_logprobs: 2 });
    const lpc = lp.choices[0].logprobs && lp.choices[0].logprobs.content;
    check(lpc && lpc.length === 6 && lpc.every((t) => t.logprob <= 0 && t.top_logprobs.length === 2),
        'logprobs: one entry per token with top_logprobs', JSON.stringify(lpc && lpc[0]));

    const sampled = { ...off, temperature: 1, top_p: 0.9, top_k: 50, min_p: 0.01, presence_penalty: 0.5, seed: 42 };
    const s1 = await client.chat.completions.create(sampled);
    const s2 = await client.chat.completions.create(sampled);
    check(s1.choices[0].message.content === s2.choices[0].message.content, 'same seed, same sampled output');

    // Errors: OpenAI shape with all four keys, right status and code.
    const bad = await request(d.base, 'POST', '/v1/chat/completions', { body: '{"messages": [', headers: { 'content-type': 'application/json' } });
    check(bad.status === 400 && bad.json && ['message', 'type', 'param', 'code'].every((k) => k in bad.json.error),
        'bad JSON: 400 with message/type/param/code', bad.text);
    const cases = [
        ['unknown model', { ...base, model: 'gpt-9' }, 404, 'model_not_found'],
        ['response_format of an unknown type', { ...base, response_format: { type: 'xml' } }, 400, 'response_format_not_supported'],
        ['n = 2', { ...base, n: 2 }, 400, 'n_not_supported'],
        ['prompt beyond the context', { ...base, messages: user('word '.repeat(3000)) }, 400, 'context_length_exceeded'],
        ['temperature out of range', { ...base, temperature: 7 }, 400, null],
        ['empty messages', { ...base, messages: [] }, 400, null],
    ];
    for (const [label, params, status, code] of cases) {
        const e = await errorOf(client.chat.completions.create(params));
        check(e instanceof OpenAI.APIError && e.status === status && (code === null || e.code === code),
            `${label}: ${status} ${code || ''}`, e && `${e.status} ${e.code} ${e.message}`);
    }
    const route = await request(d.base, 'GET', '/v1/nowhere');
    check(route.status === 404 && route.json.error.type === 'not_found_error', 'unknown route: 404');
    const method = await request(d.base, 'DELETE', '/v1/models');
    check(method.status === 405, 'wrong method: 405');
    const big = await request(d.base, 'POST', '/v1/chat/completions', { body: 'x'.repeat(2 << 20) });
    check(big.status === 413 && big.json.error.code === 'request_too_large', 'body over max-body-mib: 413', big.text.slice(0, 200));

    const metrics = await request(d.base, 'GET', '/metrics');
    check(metrics.status === 200 && /^llamacpp:prompt_tokens_total \d/m.test(metrics.text) &&
        /^ninfer_requests_total\{outcome="finished"\} \d+/m.test(metrics.text), 'metrics: ninfer_* and llamacpp:* series');
    const py = spawnSync(require('fs').existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3', ['-c', 'import sys\nfrom prometheus_client.parser import text_string_to_metric_families as p\n' +
        'print(len(list(p(sys.stdin.read()))))'], { input: metrics.text });
    if (py.status === 0) check(Number(py.stdout.toString()) > 20, 'metrics parse with prometheus_client', py.stdout.toString());
    else console.log('skip prometheus_client parse: ' + py.stderr.toString().split('\n').slice(-2).join(' '));

    // API key: every route but /health.
    const k = await start(['--api-key', 'sekrit']);
    const anon = await errorOf(k.client({ apiKey: 'wrong' }).chat.completions.create(base));
    check(anon && anon.status === 401 && anon.code === 'invalid_api_key', 'wrong key: 401 invalid_api_key');
    const ok = await k.client({ apiKey: 'sekrit' }).chat.completions.create({ ...base, max_tokens: 2 });
    check(ok.usage.completion_tokens === 2, 'Bearer key accepted');
    const xkey = await request(k.base, 'GET', '/v1/models', { headers: { 'x-api-key': 'sekrit' } });
    check(xkey.status === 200, 'x-api-key accepted');
    check((await request(k.base, 'GET', '/v1/models')).status === 401, 'no key: 401');
    check((await request(k.base, 'GET', '/metrics')).status === 401, '/metrics needs the key');
    check((await request(k.base, 'GET', '/health')).status === 200, '/health is public');
    await k.stop();
    const exit = await d.stop();
    check(exit.code === 0, 'SIGTERM when idle: exit 0', JSON.stringify(exit));
});
