// ninfer black-box test - constrained decoding (issue 32) on the tiny random-weight model, whose
// free output is noise: only the grammar can make its replies valid. Through the official openai
// SDK (response_format json_schema / json_object, strict tools, tool_choice required and named,
// Responses text.format, streaming and not), @anthropic-ai/sdk (forced tool_choice any / tool,
// with and without thinking), llama.cpp's json_schema and grammar members on /v1/chat/completions
// and /v1/completions, and the 400s that name the bad part. Every reply that ends with stop (or
// tool calls) parses and validates with ajv; the share of replies that end so is printed. A daemon
// with --speculative ngram:3 gives the same greedy constrained replies, and valid sampled ones.
'use strict';
const Ajv = require('ajv');
const Anthropic = require('@anthropic-ai/sdk');
const { main, check, request, user } = require('./harness');

const ajv = new Ajv({ strict: false, allErrors: true });

// Enums, length and item bounds, integers with bounds, a nested object, no extra properties.
const PROFILE = {
    type: 'object',
    properties: {
        color: { enum: ['red', 'green', 'blue'] },
        name: { type: 'string', minLength: 2, maxLength: 8 },
        level: { type: 'integer', minimum: 1, maximum: 5 },
        tags: { type: 'array', items: { type: 'string', maxLength: 4 }, minItems: 1, maxItems: 3 },
        flags: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'], additionalProperties: false },
    },
    required: ['color', 'name', 'level', 'tags', 'flags'],
    additionalProperties: false,
};
const SMALL = {
    type: 'object',
    properties: { ok: { type: 'boolean' }, pick: { enum: ['a', 'b', 'c'] }, code: { type: 'string', minLength: 3, maxLength: 3 } },
    required: ['ok', 'pick', 'code'],
    additionalProperties: false,
};
const SET_COLOR = {
    type: 'object',
    properties: { color: { enum: ['red', 'green', 'blue'] }, strength: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['color', 'strength'],
    additionalProperties: false,
};
const RENAME = {
    type: 'object',
    properties: { to: { type: 'string', minLength: 1, maxLength: 6 } },
    required: ['to'],
    additionalProperties: false,
};
const TOOLS = [
    { type: 'function', function: { name: 'set_color', description: 'Set the color', strict: true, parameters: SET_COLOR } },
    { type: 'function', function: { name: 'rename', description: 'Rename it', strict: true, parameters: RENAME } },
];
const SCHEMA_OF = { set_color: SET_COLOR, rename: RENAME };

const tally = { replies: 0, ended: 0 };
function validates(schema, text, what) {
    let value;
    try { value = JSON.parse(text); } catch (e) { check(false, what + ': JSON parses', text); return false; }
    const validate = ajv.compile(schema);
    const ok = validate(value);
    check(ok, what + ': validates with ajv', ok ? '' : JSON.stringify(validate.errors) + ' ' + text);
    return ok;
}

async function chatStream(client, params) {
    const stream = await client.chat.completions.create({ ...params, stream: true });
    const out = { content: '', finish: null, calls: [] };
    for await (const chunk of stream) {
        for (const c of chunk.choices) {
            out.content += c.delta.content || '';
            for (const t of c.delta.tool_calls || []) {
                if (!out.calls[t.index]) out.calls[t.index] = { name: '', arguments: '' };
                out.calls[t.index].name += (t.function && t.function.name) || '';
                out.calls[t.index].arguments += (t.function && t.function.arguments) || '';
            }
            if (c.finish_reason) out.finish = c.finish_reason;
        }
    }
    return out;
}

async function chat(client, params, stream) {
    if (stream) return chatStream(client, params);
    const r = await client.chat.completions.create(params);
    const m = r.choices[0].message;
    return { content: m.content || '', finish: r.choices[0].finish_reason,
        calls: (m.tool_calls || []).map((t) => ({ name: t.function.name, arguments: t.function.arguments })) };
}

function checkCalls(out, what, only) {
    check(out.calls.length > 0, what + ': tool calls came', JSON.stringify(out));
    for (const c of out.calls) {
        check(!only || c.name === only, what + ': the named function', c.name);
        if (SCHEMA_OF[c.name]) validates(SCHEMA_OF[c.name], c.arguments, what + ' ' + c.name + ' arguments');
        else check(false, what + ': a declared function', c.name);
    }
}

async function errorOf(promise) {
    try { await promise; } catch (e) { return e; }
    return null;
}

main('constrained', async (start) => {
    const d = await start(['--max-concurrency', '4', '--grammar-cache', '8']);
    const client = d.client();
    const off = { chat_template_kwargs: { enable_thinking: false } };
    const base = { model: 'tiny', messages: user('Describe a profile.'), max_tokens: 160, temperature: 1, ...off };

    // response_format json_schema: streaming and not, a batch of four at once.
    for (const [name, schema] of [['profile', PROFILE], ['small', SMALL]]) {
        for (const stream of [false, true]) {
            const runs = [];
            for (let seed = 1; seed <= 4; ++seed)
                runs.push(chat(client, { ...base, seed, response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } } }, stream));
            for (const out of await Promise.all(runs)) {
                ++tally.replies;
                if (out.finish !== 'stop') continue;
                ++tally.ended;
                validates(schema, out.content, `json_schema ${name}${stream ? ' streamed' : ''}`);
            }
        }
    }
    // SMALL is finite: the grammar finishes inside max_tokens, so every reply ends with stop.
    const small = await chat(client, { ...base, seed: 9, response_format: { type: 'json_schema', json_schema: { name: 's', schema: SMALL } } }, false);
    check(small.finish === 'stop', 'a finite schema always ends with stop', JSON.stringify(small));

    // json_object
    const obj = await chat(client, { ...base, seed: 3, max_tokens: 60, response_format: { type: 'json_object' } }, false);
    ++tally.replies;
    if (obj.finish === 'stop') {
        ++tally.ended;
        let v = null;
        try { v = JSON.parse(obj.content); } catch (_) { /* checked below */ }
        check(v !== null && typeof v === 'object' && !Array.isArray(v), 'json_object: a JSON object', obj.content);
    }

    // Strict tools: tool_choice required and named, streaming and not; auto may answer in text.
    for (const stream of [false, true]) {
        const req = await chat(client, { ...base, seed: 5, tools: TOOLS, tool_choice: 'required' }, stream);
        ++tally.replies;
        if (req.finish === 'tool_calls') ++tally.ended, checkCalls(req, `tool_choice required${stream ? ' streamed' : ''}`);
        const named = await chat(client, { ...base, seed: 6, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'rename' } } }, stream);
        ++tally.replies;
        if (named.finish === 'tool_calls') ++tally.ended, checkCalls(named, `named tool${stream ? ' streamed' : ''}`, 'rename');
    }
    const auto = await chat(client, { ...base, seed: 7, tools: TOOLS }, false);
    if (auto.calls.length) checkCalls(auto, 'strict tools, tool_choice auto');
    check(!auto.content.includes('<tool_call>'), 'auto: no raw tool-call markup in the text', auto.content);

    // Thinking on: the reasoning is free (a budget closes it), the grammar applies after </think>.
    const anthropic = new Anthropic({ baseURL: d.base, apiKey: 'none', maxRetries: 0 });
    const toolSpec = (t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters });
    for (const [label, extra] of [['any', { tool_choice: { type: 'any' } }],
                                  ['tool', { tool_choice: { type: 'tool', name: 'set_color' } }],
                                  ['any + thinking', { tool_choice: { type: 'any' }, thinking: { type: 'enabled', budget_tokens: 12 } }]]) {
        const msg = await anthropic.messages.create({ model: 'tiny', max_tokens: 200, temperature: 1,
            messages: [{ role: 'user', content: 'Set something.' }], tools: TOOLS.map(toolSpec), ...extra });
        ++tally.replies;
        const uses = msg.content.filter((b) => b.type === 'tool_use');
        if (msg.stop_reason !== 'tool_use') continue;
        ++tally.ended;
        check(uses.length > 0, `anthropic tool_choice ${label}: tool_use blocks`, JSON.stringify(msg.content));
        for (const u of uses) {
            check(label !== 'tool' || u.name === 'set_color', `anthropic tool_choice ${label}: the named tool`, u.name);
            const schema = SCHEMA_OF[u.name];
            check(!!schema && ajv.validate(schema, u.input), `anthropic tool_choice ${label}: input validates`, JSON.stringify(u.input));
        }
        if (label.includes('thinking'))
            check(msg.content.some((b) => b.type === 'thinking'), 'anthropic thinking: a free thinking block first', JSON.stringify(msg.content));
    }

    // Responses text.format json_schema.
    for (const stream of [false, true]) {
        const params = { model: 'tiny', input: 'A profile please.', max_output_tokens: 160, temperature: 1,
            reasoning: { effort: 'none' }, text: { format: { type: 'json_schema', name: 'small', schema: SMALL, strict: true } } };
        let text = '', status = '';
        if (stream) {
            const s = await client.responses.create({ ...params, stream: true });
            for await (const ev of s) {
                if (ev.type === 'response.output_text.delta') text += ev.delta;
                if (ev.type === 'response.completed' || ev.type === 'response.incomplete') status = ev.response.status;
            }
        } else {
            const r = await client.responses.create(params);
            text = r.output_text;
            status = r.status;
        }
        ++tally.replies;
        if (status === 'completed') ++tally.ended, validates(SMALL, text, `responses text.format${stream ? ' streamed' : ''}`);
    }

    // llama.cpp's members: json_schema and grammar, on chat and on /v1/completions.
    const yesNo = 'root ::= ("yes" | "no") " " [0-9]{2}';
    const g = await request(d.base, 'POST', '/v1/chat/completions', { body: { ...base, grammar: yesNo, seed: 2 } });
    check(g.status === 200 && /^(yes|no) [0-9]{2}$/.test(g.json.choices[0].message.content), 'chat grammar (GBNF)', g.text);
    const cg = await request(d.base, 'POST', '/v1/completions', { body: { model: 'tiny', prompt: 'Answer:', max_tokens: 20, grammar: yesNo } });
    check(cg.status === 200 && /^(yes|no) [0-9]{2}$/.test(cg.json.choices[0].text), 'completions grammar (GBNF)', cg.text);
    const cj = await request(d.base, 'POST', '/v1/completions', { body: { model: 'tiny', prompt: '{', max_tokens: 80, json_schema: SMALL, temperature: 1 } });
    check(cj.status === 200, 'completions json_schema answered', cj.text);
    if (cj.status === 200 && cj.json.choices[0].finish_reason === 'stop') validates(SMALL, cj.json.choices[0].text, 'completions json_schema');

    // Bad input: 400 naming the part.
    const cases = [
        [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } } } }, 'response_format.json_schema.schema'],
        [{ grammar: 'root ::= "a" missing-rule' }, 'grammar'],
        [{ grammar: 'root ::= "a"', json_schema: SMALL }, 'grammar'],
        [{ response_format: { type: 'xml' } }, 'response_format'],
        [{ response_format: { type: 'json_schema', json_schema: { name: 'x' } } }, 'response_format.json_schema.schema'],
        [{ tools: [{ type: 'function', function: { name: 'bad', strict: true, parameters: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } } }], tool_choice: 'required' }, 'tools[0].function.parameters'],
    ];
    for (const [extra, param] of cases) {
        const r = await request(d.base, 'POST', '/v1/chat/completions', { body: { ...base, ...extra } });
        check(r.status === 400 && r.json && r.json.error && r.json.error.param === param,
            `400 names ${param}`, `${r.status} ${r.text}`);
    }
    const healthy = await chat(client, { ...base, max_tokens: 8 }, false);
    check(healthy.finish === 'length', 'the server still serves after the bad requests');

    // Speculation (issue 32 item 5): with --speculative ngram:3, constrained replies take n-gram
    // drafts checked against the grammar; greedy replies equal the plain daemon's, sampled ones validate.
    const spec = await start(['--max-concurrency', '2', '--speculative', 'ngram:3']);
    const example = 'Like these: {"ok":true,"pick":"b","code":"xyz"} {"ok":false,"pick":"a","code":"abc"} yes 12 no 34';
    const specCases = [['json_schema', { response_format: { type: 'json_schema', json_schema: { name: 's', schema: SMALL, strict: true } } }],
                       ['grammar', { grammar: yesNo }]];
    let drafted = 0, accepted = 0;
    for (const [label, extra] of specCases) {
        const body = { ...base, messages: user(example), temperature: 0, max_tokens: 80, ...extra };
        const [a, b] = await Promise.all([d, spec].map((x) => request(x.base, 'POST', '/v1/chat/completions', { body })));
        check(a.status === 200 && b.status === 200 && a.json.choices[0].message.content === b.json.choices[0].message.content &&
            a.json.choices[0].finish_reason === b.json.choices[0].finish_reason,
            `ngram:3 ${label}: the greedy reply equals the plain daemon's`, `${a.text} / ${b.text}`);
        if (b.status !== 200) continue;
        drafted += b.json.timings.draft_n, accepted += b.json.timings.draft_n_accepted;
        check(b.json.timings.draft_n_accepted <= b.json.timings.draft_n, `ngram:3 ${label}: draft_n_accepted <= draft_n`);
        if (label === 'json_schema' && b.json.choices[0].finish_reason === 'stop') validates(SMALL, b.json.choices[0].message.content, 'ngram:3 json_schema');
        if (label === 'grammar') check(/^(yes|no) [0-9]{2}$/.test(b.json.choices[0].message.content), 'ngram:3 grammar (GBNF)', b.text);
    }
    for (const stream of [false, true]) { // sampled, a batch of two
        const runs = [1, 2].map((seed) => chat(spec.client(), { ...base, messages: user(example), seed, ...specCases[0][1] }, stream));
        for (const out of await Promise.all(runs)) {
            ++tally.replies;
            if (out.finish !== 'stop') continue;
            ++tally.ended;
            validates(SMALL, out.content, `ngram:3 json_schema sampled${stream ? ' streamed' : ''}`);
        }
    }
    console.log(`ngram:3 constrained greedy replies: ${accepted} of ${drafted} verified drafts accepted`);
    const metrics = (await request(spec.base, 'GET', '/metrics')).text;
    const refused = metrics.match(/^ninfer_spec_decode_num_draft_tokens_refused_total (\d+)$/m);
    check(refused !== null, '/metrics counts the drafts a grammar refused (ninfer_spec_decode_num_draft_tokens_refused_total)');
    if (refused) console.log(`ngram:3 drafts refused by the grammar before verification: ${refused[1]}`);

    console.log(`constrained replies ending with stop (or tool calls): ${tally.ended} of ${tally.replies}`);
    check(tally.ended > 0, 'some constrained replies ended inside max_tokens');
});
