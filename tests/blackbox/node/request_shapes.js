// ninfer black-box test - malformed JSON request bodies on every API route (issue 30 item 4): the
// nested-field cases that answered 500, then each valid body with every member deleted in turn and
// every value replaced by each JSON type. Every answer is 2xx or 4xx, never 5xx; every error is in
// its API's own shape (OpenAI {"error":{message,type,param,code}}, Anthropic {"type":"error",...})
// and names a field of the body; the daemon keeps serving.
'use strict';
const { main, check, request } = require('./harness');

const isAnthropic = (path) => path.startsWith('/v1/messages');

const valid = {
    '/v1/chat/completions': {
        model: 'tiny', max_tokens: 2, stream: false, stream_options: { include_usage: true },
        messages: [{ role: 'system', content: 's' }, { role: 'user', content: [{ type: 'text', text: 'hi' }] },
            { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
            { role: 'tool', tool_call_id: 'c1', content: 'ok' }],
        tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' } } }],
        tool_choice: 'auto', stop: ['x'], temperature: 0, top_k: 4, seed: 3, logit_bias: { 5: 1 },
        response_format: { type: 'text' }, logprobs: true, top_logprobs: 2,
        chat_template_kwargs: { enable_thinking: false },
    },
    '/v1/responses': {
        model: 'tiny', max_output_tokens: 2, store: false, instructions: 'i', reasoning: { effort: 'none' },
        text: { format: { type: 'text' } }, temperature: 0,
        input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'weather?' }] },
            { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
            { type: 'function_call_output', call_id: 'c1', output: 'sunny' }],
        tools: [{ type: 'function', name: 'f', description: 'd', parameters: { type: 'object' } }],
        tool_choice: { type: 'function', name: 'f' },
    },
    '/v1/messages': {
        model: 'tiny', max_tokens: 2, system: [{ type: 'text', text: 'A' }], temperature: 0,
        messages: [{ role: 'user', content: 'weather?' },
            { role: 'assistant', content: [{ type: 'text', text: 'c' }, { type: 'tool_use', id: 't1', name: 'f', input: { city: 'P' } }] },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'sunny' }] }] }],
        tools: [{ name: 'f', description: 'd', input_schema: { type: 'object' } }],
        tool_choice: { type: 'auto' }, thinking: { type: 'disabled' }, stop_sequences: ['END'],
    },
    '/v1/completions': { model: 'tiny', prompt: 'Once', max_tokens: 2, stream: false, echo: false, stop: ['x'], temperature: 0 },
    '/tokenize': { content: 'Hello world', parse_special: true, with_pieces: true },
    '/detokenize': { tokens: [1, 2, 3] },
};
valid['/v1/messages/count_tokens'] = { ...valid['/v1/messages'] };
delete valid['/v1/messages/count_tokens'].max_tokens;

// The nested-field cases the issue found (500 before the fix) with the field each must name.
const known = [
    ['/v1/responses', { input: 'q', tools: [{ type: 'function' }] }, 'tools[0].name'],
    ['/v1/responses', { input: 'q', tool_choice: { type: 'function' } }, 'tool_choice.name'],
    ['/v1/messages', { max_tokens: 2, messages: [{ content: 'hi' }] }, 'messages[0].role'],
    ['/v1/messages/count_tokens', { messages: [{ content: 'hi' }] }, 'messages[0].role'],
    ['/v1/messages', { max_tokens: 2, messages: [{ role: 'assistant', content: [{ type: 'tool_use', name: 'f', input: {} }] }] },
        'messages[0].content[0].id'],
    ['/v1/messages', { max_tokens: 2, messages: [{ role: 'user', content: [{ type: 'tool_result', content: 'x' }] }] },
        'messages[0].content[0].tool_use_id'],
    ['/v1/chat/completions', { max_tokens: 2, messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: {} }] },
        'tools[0].function.name'],
    ['/v1/chat/completions', { max_tokens: 2, messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 'messages[0].content.text'],
];

const replacements = [null, true, 0, -1, 0.5, 1e300, '', 'x', [], {}, [{}], { type: 'text' }];

// [description, body] for every single deletion or replacement inside `value`.
function* mutations(value, path = '') {
    if (value === null || typeof value !== 'object') return;
    const keys = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value);
    for (const k of keys) {
        const here = Array.isArray(value) ? `${path}[${k}]` : path ? `${path}.${k}` : String(k);
        const without = Array.isArray(value) ? value.filter((_, i) => i !== k) : { ...value };
        if (!Array.isArray(value)) delete without[k];
        yield [`delete ${here}`, without];
        for (const r of replacements) {
            const copy = Array.isArray(value) ? [...value] : { ...value };
            copy[k] = r;
            yield [`${here} = ${JSON.stringify(r)}`, copy];
        }
        for (const [what, inner] of mutations(value[k], here)) {
            const copy = Array.isArray(value) ? [...value] : { ...value };
            copy[k] = inner;
            yield [what, copy];
        }
    }
}

// The problem with an error answer, or '' when it is in its API's shape and names a field of `body`.
function shapeProblem(path, reply, body) {
    const j = reply.json;
    const fields = Object.keys(body);
    if (isAnthropic(path)) {
        if (!j || j.type !== 'error' || !j.error || typeof j.error.type !== 'string' || typeof j.error.message !== 'string')
            return 'not the Anthropic error shape';
        return fields.some((f) => j.error.message.includes(f)) ? '' : 'the message names no field';
    }
    if (!j || !j.error || !['message', 'type', 'param', 'code'].every((k) => k in j.error)) return 'not the OpenAI error shape';
    return typeof j.error.param === 'string' && fields.some((f) => j.error.param.startsWith(f)) ? '' : 'param names no field';
}

main('request_shapes', async (start) => {
    // Bodies that lose max_tokens generate at most 4 tokens: the sweep stays quick.
    const d = await start(['--max-concurrency', '2', '--default-max-tokens', '4']);
    for (const [path, body, field] of known) {
        const r = await request(d.base, 'POST', path, { body });
        const message = r.json && r.json.error ? r.json.error.message : '';
        const named = isAnthropic(path) ? message.includes(field) : r.json && r.json.error && r.json.error.param === field;
        check(r.status === 400 && named && !shapeProblem(path, r, body), `${path} ${field} missing: 400 naming it`,
            `${r.status} ${r.text}`);
    }
    const statuses = {};
    let n = 0;
    const seconds = {};
    for (const [path, body] of Object.entries(valid)) {
        const t0 = Date.now();
        const ok = await request(d.base, 'POST', path, { body });
        check(ok.status === 200, `${path}: the valid body is served`, `${ok.status} ${ok.text.slice(0, 300)}`);
        let bad = 0;
        for (const [what, mutated] of mutations(body)) {
            n++;
            const r = await request(d.base, 'POST', path, { body: mutated });
            statuses[r.status] = (statuses[r.status] || 0) + 1;
            const problem = r.status >= 500 ? 'a 5xx' : r.status >= 400 ? shapeProblem(path, r, body) : '';
            if (problem && ++bad <= 5) console.log(`  ${path} ${what}: ${problem}: ${r.status} ${r.text.slice(0, 200)}`);
        }
        check(bad === 0, `${path}: every mutated body is 2xx or a 4xx in the API's shape naming a field`, `${bad} bad`);
        seconds[path] = (Date.now() - t0) / 1000;
    }
    console.log(`figures: ${n} mutated bodies, answers by status ${JSON.stringify(statuses)}, ` +
        `seconds by route ${JSON.stringify(seconds)}`);
    check((await request(d.base, 'GET', '/health')).status === 200, 'the daemon still serves');
    check((await d.stop()).code === 0, 'exit 0');
});
