// ninfer black-box test - the start log says which backend --device auto chose and why; /metrics
// tells what is true of this server: the backend in use (not the
// --device option "auto"), llama.cpp's n_tokens_max as the largest sequence observed (not the
// configured context), request-duration buckets that reach hours (agents' long turns), and
// vLLM's queue-time, inter-token-latency and prompt/generation-length histograms.
'use strict';
const { main, check, request } = require('./harness');

const metric = (text, re) => { const m = text.match(re); return m ? Number(m[1]) : null; };

main('serving_facts', async (start) => {
    const d = await start(); // --device auto on a machine without a GPU (or a CPU build): cpu
    check(/--device auto: cpu, (this ninferd was built without the CUDA backend|no usable GPU: .+)/.test(d.log()),
        '--device auto logs the backend it chose and why', d.log().slice(0, 600));
    const before = (await request(d.base, 'GET', '/metrics')).text;
    check(/ninfer_model_info\{model="tiny",device="cpu"\} 1/.test(before), 'model_info names the backend in use, not "auto"',
        (before.match(/ninfer_model_info\{.*/) || [''])[0]);
    check(/^ninfer_build_info\{version="[0-9][^"]*",cuda="(on|off)"\} 1$/m.test(before), 'ninfer_build_info names the version and the CUDA build',
        (before.match(/^ninfer_build_info.*$/m) || ['(none)'])[0]);
    check(metric(before, /^llamacpp:n_tokens_max (\S+)$/m) === 0, 'n_tokens_max is 0 before any request',
        (before.match(/^llamacpp:n_tokens_max.*$/m) || [''])[0]);
    const r = await request(d.base, 'POST', '/v1/chat/completions', { body: {
        messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 5, chat_template_kwargs: { enable_thinking: false } } });
    const used = r.json.usage.prompt_tokens + r.json.usage.completion_tokens;
    const after = (await request(d.base, 'GET', '/metrics')).text;
    check(metric(after, /^llamacpp:n_tokens_max (\S+)$/m) === used, `n_tokens_max is the largest sequence seen (${used})`,
        (after.match(/^llamacpp:n_tokens_max.*$/m) || [''])[0]);
    check(/ninfer_request_duration_seconds_bucket\{le="3600"\}/.test(after), 'request duration buckets reach an hour',
        (after.match(/ninfer_request_duration_seconds_bucket.*/g) || []).join(' '));

    // vLLM's histograms: queue time and prompt/output lengths per finished request, and one
    // inter-token gap per token after a reply's first.
    const usages = [r.json.usage];
    for (const words of [40, 320]) {
        const x = await request(d.base, 'POST', '/v1/chat/completions', { body: {
            messages: [{ role: 'user', content: 'word '.repeat(words) }], max_tokens: 3 + words / 40, chat_template_kwargs: { enable_thinking: false } } });
        usages.push(x.json.usage);
    }
    const m = (await request(d.base, 'GET', '/metrics')).text;
    const sum = (f) => usages.reduce((a, u) => a + f(u), 0);
    const facts = [
        ['ninfer_request_queue_time_seconds_count', usages.length],
        ['ninfer_request_prompt_tokens_count', usages.length],
        ['ninfer_request_prompt_tokens_sum', sum((u) => u.prompt_tokens)],
        ['ninfer_request_generation_tokens_sum', sum((u) => u.completion_tokens)],
        ['ninfer_inter_token_latency_seconds_count', sum((u) => u.completion_tokens - 1)],
    ];
    for (const [name, want] of facts)
        check(metric(m, new RegExp('^' + name + ' (\\S+)$', 'm')) === want, `${name} = ${want}`,
            (m.match(new RegExp('^' + name + '.*$', 'm')) || ['(none)'])[0]);
    check(metric(m, /^ninfer_request_prompt_tokens_bucket\{le="\+Inf"\} (\S+)$/m) === usages.length &&
        metric(m, /^ninfer_request_prompt_tokens_bucket\{le="1"\} (\S+)$/m) === 0, 'prompt-length buckets are cumulative');
});
