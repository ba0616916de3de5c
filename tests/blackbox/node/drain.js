// ninfer black-box test - SIGTERM drain: an in-flight stream finishes, new requests get 503, the
// daemon exits 0; past drain-timeout-s the stream is cut in-band and the daemon still exits 0.
'use strict';
const { main, check, request, user } = require('./harness');

async function streamUntilDone(client, params, onFirst) {
    const out = { text: '', finish: null, error: null, chunks: 0 };
    try {
        const stream = await client.chat.completions.create({ ...params, stream: true });
        for await (const chunk of stream) {
            if (++out.chunks === 2) await onFirst();
            for (const c of chunk.choices) {
                out.text += c.delta.content || '';
                if (c.finish_reason) out.finish = c.finish_reason;
            }
        }
    } catch (e) {
        out.error = e;
    }
    return out;
}

main('drain', async (start) => {
    const params = { model: 'tiny', messages: user('keep talking'), temperature: 0, max_tokens: 60,
        chat_template_kwargs: { enable_thinking: false } };
    const d = await start(['--drain-timeout-s', '30']);
    let during = null;
    const r = await streamUntilDone(d.client(), params, async () => {
        d.proc.kill('SIGTERM');
        await new Promise((res) => setTimeout(res, 100));
        during = await request(d.base, 'POST', '/v1/chat/completions', { body: params });
    });
    check(r.error === null && r.finish === 'length', 'the in-flight stream finished normally', r.error && String(r.error));
    check(during && during.status === 503, 'a new request while draining: 503', during && during.text);
    const exit = await d.exited;
    check(exit.code === 0, 'exit 0 after the drain', JSON.stringify(exit));

    const short = await start(['--drain-timeout-s', '1']);
    const t0 = Date.now();
    let t_term = 0;
    const cut = await streamUntilDone(short.client(), { ...params, max_tokens: 1900 }, async () => {
        t_term = Date.now();
        short.proc.kill('SIGTERM');
    });
    const exit2 = await short.exited;
    check(cut.finish === null && Date.now() - t_term < 10000, 'past the deadline the stream is cut',
        `after ${Date.now() - t_term} ms, ${cut.chunks} chunks, error ${cut.error}`);
    check(exit2.code === 0, 'exit 0 after a drain deadline', JSON.stringify(exit2));
    void t0;
});
