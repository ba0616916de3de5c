// ninfer black-box test - the start log says which backend --device auto chose and why; /metrics
// tells what is true of this server: the backend in use (not the
// --device option "auto"), llama.cpp's n_tokens_max as the largest sequence observed (not the
// configured context), and request-duration buckets that reach hours (agents' long turns).
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
});
