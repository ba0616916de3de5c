// ninfer black-box test - --max-context auto (the default) on the CPU backend: the tiny model's
// whole max_position_embeddings when every lane fits it, an explicit --kv-capacity shared by the
// lanes, --check-config printing the choice, and under a memory cgroup limit (created when this
// machine lets us: root and a writable cgroup fs; else said and skipped) the most that fits, with
// the figures logged, or a refusal naming the deficit when not even 64 tokens a lane fit.
'use strict';
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { main, check, request, TEST_DIR } = require('./harness');

const AUTO = ['--max-context', 'auto', '--host-cache-mib', '64']; // the harness sets 2048 before these

async function servedContext(d) {
    const models = (await request(d.base, 'GET', '/v1/models')).json;
    const props = (await request(d.base, 'GET', '/props')).json;
    return { models: models.data[0].max_model_len, props: props.default_generation_settings.n_ctx };
}

const chat = (d, words) => request(d.base, 'POST', '/v1/chat/completions',
    { body: { messages: [{ role: 'user', content: 'word '.repeat(words) }], max_tokens: 1 } });

// A child memory cgroup with `limitBytes`, v1 or v2, or null (with the reason printed).
function memoryCgroup(limitBytes) {
    const name = `ninfer-test-${process.pid}-${limitBytes}`;
    const candidates = [['/sys/fs/cgroup/memory', 'memory.limit_in_bytes'], ['/sys/fs/cgroup', 'memory.max']];
    for (const [root, limitFile] of candidates) {
        const dir = path.join(root, name);
        try {
            fs.mkdirSync(dir);
        } catch (_) {
            continue;
        }
        try {
            fs.writeFileSync(path.join(dir, limitFile), String(limitBytes));
            return { dir, remove: () => { try { fs.rmdirSync(dir); } catch (_) { /* a process may linger */ } } };
        } catch (_) {
            fs.rmdirSync(dir);
        }
    }
    console.log('skip the memory-limit cases: cannot create a memory cgroup here (needs root and a writable cgroup fs)');
    return null;
}

// ninferd started inside the cgroup: a wrapper moves itself there, then execs the daemon.
function wrapperIn(cgroup) {
    const wrapper = path.join(TEST_DIR, path.basename(cgroup.dir) + '.sh');
    fs.writeFileSync(wrapper, `#!/bin/sh\necho $$ > '${cgroup.dir}/cgroup.procs' || exit 99\nexec '${process.env.NINFERD}' "$@"\n`, { mode: 0o755 });
    return wrapper;
}

main('max_context_auto', async (start) => {
    // The model's whole limit: 4 lanes x 262144 tokens x 512 B of KV fit this host.
    const d = await start(AUTO);
    check(/plan, --max-context auto: 262144 tokens, the model's max_position_embeddings: 4 lanes x 262144 tokens of KV \(512\.0 MiB\) fit in [\d.]+ MiB available/.test(d.log()),
        'auto picks the model\'s max_position_embeddings and logs the figures', d.log());
    const full = await servedContext(d);
    check(full.models === 262144 && full.props === 262144, '/v1/models and /props show it', JSON.stringify(full));
    const long = await chat(d, 3000);
    check(long.status === 200, 'a 3000-token prompt is served (beyond a fixed 2048)', long.text.slice(0, 200));
    await d.stop();

    // An explicit KV pool is shared: 8192 tokens for 4 lanes = 2048 each.
    const k = await start([...AUTO, '--kv-capacity', '8192']);
    check(/--max-context auto: 2048 tokens, the most that fits: kv-capacity 8192 tokens shared by 4 lanes/.test(k.log()),
        '--kv-capacity 8192 with 4 lanes: 2048 tokens a lane', k.log());
    check((await servedContext(k)).models === 2048, '/v1/models shows 2048');
    const over = await chat(k, 2100);
    check(over.status === 400 && /prompt is too long: \d+ tokens > 2048 maximum/.test(over.text), 'a longer prompt: 400 prompt is too long', over.text);
    await k.stop();

    const conf = path.join(TEST_DIR, 'empty.conf');
    const cc = spawnSync(process.env.NINFERD, ['--config', conf, '--artifact', process.env.NINFER_TINY_ARTIFACT, '--kv-capacity', '8192',
        '--check-config'], { encoding: 'utf8' });
    check(cc.status === 0 && /^max-context = auto$/m.test(cc.stdout) && /^# --max-context auto: 2048 tokens/m.test(cc.stdout),
        '--check-config prints the setting and the choice', cc.stdout + cc.stderr);
    const bad = spawnSync(process.env.NINFERD, ['--config', conf, '--artifact', process.env.NINFER_TINY_ARTIFACT, '--max-context', '8',
        '--check-config'], { encoding: 'utf8' });
    check(bad.status !== 0 && /'max-context' must be auto or in 16\.\.1048576, got 8/.test(bad.stderr), 'max-context 8: a clear error', bad.stderr);

    // Under a 900 MiB memory cgroup: 512 MiB of KV for the model's limit do not fit beside the
    // 512 MiB margin, so auto takes the most that does.
    const cg = memoryCgroup(900 * 1048576);
    if (cg) {
        const ninferd = process.env.NINFERD;
        try {
            process.env.NINFERD = wrapperIn(cg);
            const m = await start(AUTO);
            const line = m.log().match(/--max-context auto: (\d+) tokens, the most that fits: the model's 262144 tokens for 4 lanes need 512\.0 MiB of KV; ([\d.]+) MiB is left of ([\d.]+) MiB available after weights/);
            check(line && Number(line[3]) <= 900 && Number(line[1]) < 262144 && Number(line[1]) % 64 === 0,
                'a 900 MiB cgroup: the most that fits, with the figures', m.log());
            const served = await servedContext(m);
            check(line && served.models === Number(line[1]), '/v1/models shows the choice', JSON.stringify(served));
            check((await chat(m, 100)).status === 200, 'and the daemon serves within its limit');
            await m.stop();
        } finally {
            process.env.NINFERD = ninferd;
            cg.remove();
        }
        // 300 MiB: not even the margin fits: ninferd refuses to start and says why.
        const tight = memoryCgroup(300 * 1048576);
        if (tight) {
            const r = spawnSync(wrapperIn(tight), ['--config', conf, '--artifact', process.env.NINFER_TINY_ARTIFACT, '--check-config'],
                { encoding: 'utf8' });
            tight.remove();
            check(r.status !== 0 && /--max-context auto: not even 64 tokens a lane fit: .*deficit \d+ bytes/.test(r.stderr),
                'a 300 MiB cgroup: refused, naming the deficit', r.stderr);
        }
    }
});
