// ninfer black-box test - prefill/decode interleaving: while lane B prefills a long prompt in
// prefill-chunk pieces, lane A gets a token between every two chunks and never waits for the whole
// prefill. Prints the measured figures: A's largest gap beside "about one chunk plus one decode
// step" is a figure, not an assertion (wall time on shared cores is not the scheduler's to keep).
'use strict';
const { main, check, user } = require('./harness');

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

main('interleave', async (start) => {
    const chunk = 256; // large enough that a chunk's time dominates scheduling jitter
    const d = await start(['--max-concurrency', '2', '--prefill-chunk', String(chunk), '--max-context', '8192']);
    const client = d.client();
    const off = { chat_template_kwargs: { enable_thinking: false } };
    const arrivals = [];
    let resolveWarm;
    const warm = new Promise((r) => (resolveWarm = r));
    const streamA = (async () => {
        const s = await client.chat.completions.create({ model: 'tiny', messages: user('count'), temperature: 0,
            max_tokens: 3000, stream: true, ...off });
        for await (const c of s) {
            arrivals.push(performance.now());
            if (arrivals.length === 30) resolveWarm();
            if (stopA) { s.controller.abort(); break; }
        }
    })();
    let stopA = false;
    await warm;
    const tB0 = performance.now();
    const b = await client.chat.completions.create({ model: 'tiny', messages: user('word '.repeat(4000)), max_tokens: 1,
        temperature: 0, ...off });
    const tB1 = performance.now();
    stopA = true;
    await streamA;

    const before = arrivals.filter((t) => t < tB0);
    const decodeGaps = before.slice(1).map((t, i) => t - before[i]).slice(-20);
    const stepMs = median(decodeGaps);
    // B's prefill window: admission to its first token (its prompt was tokenized off the engine
    // thread before that, competing for the CPU, which is not what this test measures).
    const prefillStart = tB1 - b.timings.prompt_ms;
    const during = arrivals.filter((t) => t >= prefillStart && t <= tB1);
    const gaps = during.slice(1).map((t, i) => t - during[i]);
    const maxGap = Math.max(...gaps);
    const nChunks = Math.ceil(b.timings.prompt_n / chunk);
    // B's prompt time holds its chunks and A's decode steps between them.
    const chunkMs = Math.max(0, (b.timings.prompt_ms - during.length * stepMs) / nChunks);
    // Twice the average chunk: late chunks attend over a longer prefix and cost more than the mean.
    const bound = 2 * (chunkMs + stepMs);
    console.log(`figures: prompt ${b.timings.prompt_n} tokens in ${nChunks} chunks of ${chunk}, prefill ${b.timings.prompt_ms.toFixed(0)} ms, ` +
        `chunk ~${chunkMs.toFixed(1)} ms, decode step ~${stepMs.toFixed(1)} ms, A tokens during B's prefill ${during.length}, ` +
        `max gap ${maxGap.toFixed(1)} ms (about one chunk plus one step: ${bound.toFixed(1)} ms)`);
    // The scheduler runs one chunk, then one batched decode step: A gets a token between chunks.
    check(during.length >= nChunks - 1, 'lane A got a token between every two of B\'s chunks',
        `${during.length} tokens for ${nChunks} chunks`);
    check(maxGap < b.timings.prompt_ms / 4, 'A never waited for the whole prefill');
    await d.stop();
});
