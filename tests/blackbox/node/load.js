// ninfer black-box load test - requests/s on concurrent streaming chat (8 clients, 4 lanes) then on
// /health (keep-alive, 32 connections); no request may fail; the daemon's RSS at the end must be
// at most its RSS after the first 10% of the work plus 8 MiB. Prints the figures. Sizes:
// NINFER_LOAD_STREAMS (96), NINFER_LOAD_HEALTH (20000).
'use strict';
const http = require('http');
const { main, check, request, rssKiB, user } = require('./harness');

const N_HEALTH = Number(process.env.NINFER_LOAD_HEALTH || 20000);
const N_STREAMS = Number(process.env.NINFER_LOAD_STREAMS || 96);

async function pool(n, width, fn) {
    let next = 0;
    await Promise.all([...Array(width)].map(async () => {
        while (next < n) await fn(next++);
    }));
}

main('load', async (start) => {
    // A small prefix cache: it is exercised, and the memory it may keep stays below the RSS margin.
    const d = await start(['--max-concurrency', '4', '--max-pending', '64', '--host-cache-mib', '4']);
    const pid = d.proc.pid;
    const client = d.client();
    // Streaming first: the RSS baseline is taken once every code path has run (10% of the work).
    let streamErrors = 0;
    let tokens = 0;
    let rss10 = 0;
    const t1 = performance.now();
    await pool(N_STREAMS, 8, async (i) => {
        try {
            const s = await client.chat.completions.create({ model: 'tiny', messages: user(`load request ${i}`), temperature: 0,
                max_tokens: 16, stream: true, stream_options: { include_usage: true },
                chat_template_kwargs: { enable_thinking: false } });
            for await (const c of s) if (c.usage) tokens += c.usage.completion_tokens;
        } catch (e) {
            streamErrors++;
            console.log('stream error: ' + e);
        }
        if (i === Math.floor(N_STREAMS / 10)) rss10 = rssKiB(pid);
    });
    const streamS = (performance.now() - t1) / 1000;
    const rssStreamEnd = rssKiB(pid);
    console.log(`figures: streaming ${N_STREAMS} chats x 16 tokens, 8 concurrent clients, 4 lanes, in ${streamS.toFixed(2)} s = ` +
        `${(N_STREAMS / streamS).toFixed(2)} req/s, ${(tokens / streamS).toFixed(1)} tokens/s, ${streamErrors} failed; ` +
        `RSS ${rss10} KiB after 10% -> ${rssStreamEnd} KiB`);
    check(streamErrors === 0 && tokens === 16 * N_STREAMS, 'streaming: no failed request, every token delivered', String(tokens));

    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    let bad = 0;
    let rssHealth10 = 0;
    const t0 = performance.now();
    await pool(N_HEALTH, 32, async (i) => {
        const r = await request(d.base, 'GET', '/health', { agent });
        if (r.status !== 200) bad++;
        if (i === Math.floor(N_HEALTH / 10)) rssHealth10 = rssKiB(pid);
    });
    const healthS = (performance.now() - t0) / 1000;
    const rssEnd = rssKiB(pid);
    console.log(`figures: /health ${N_HEALTH} requests, 32 keep-alive connections, in ${healthS.toFixed(2)} s = ` +
        `${(N_HEALTH / healthS).toFixed(0)} req/s, ${bad} failed, RSS ${rssHealth10} KiB after 10% -> ${rssEnd} KiB`);
    check(bad === 0, '/health: no failed request');
    check(rssEnd <= rss10 + 8192, 'RSS at the end <= RSS after the first 10% of the work + 8 MiB', `${rss10} -> ${rssEnd} KiB`);
    const m = await request(d.base, 'GET', '/metrics');
    check(/^ninfer_requests_running 0$/m.test(m.text) && /^ninfer_requests_waiting 0$/m.test(m.text), 'no request left behind');
    agent.destroy();
    await d.stop();
});
