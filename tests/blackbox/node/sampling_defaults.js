// ninfer black-box test - sampling defaults: the artifact's generation_config.json (converted from
// tests/fixtures/model/generality/dense_text/hf: temperature 0.6, top_k 20, top_p 0.95) applies to
// requests that leave the fields out, ninferd's --temperature/--top-p/... override it, /props shows
// what is in force, and `ninferctl run` samples exactly like the HTTP API with the same seed.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync, spawnSync } = require('child_process');
const { main, check, request, TEST_DIR } = require('./harness');

const SRC = process.env.NINFER_SOURCE_DIR;
const CTL = path.join(process.env.NINFER_BIN, 'ctl/ninferctl');
const PROMPT = [40, 41, 42, 43, 44];

// `ninferctl run` on the same artifact, prompt ids and seed: the generated text (the same
// detokenizer as the API's, so ids outside the tokenizer's vocabulary read alike).
function runText(artifact, extra) {
    return execFileSync(CTL, ['run', artifact, '--prompt-ids', PROMPT.join(','), '--max-new', '48', '--ignore-eos',
        '--device', 'cpu', ...extra], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).replace(/\n$/, '');
}

async function apiIds(d, extra) {
    const r = await request(d.base, 'POST', '/v1/completions', { body: { prompt: PROMPT, max_tokens: 48, ignore_eos: true, ...extra } });
    if (!r.json || !r.json.choices) return { text: r.text };
    // ninferctl run prints no special tokens; the API's text keeps them (<|vision_end|>).
    return { text: r.json.choices[0].text.replace(/<\|[a-z_]+\|>/g, '') };
}

main('sampling_defaults', async (start) => {
    const artifact = path.join(TEST_DIR, 'gen.ninfer');
    execFileSync(CTL, ['convert', path.join(SRC, 'tests/fixtures/model/generality/dense_text/hf'), artifact],
        { stdio: ['ignore', 'ignore', 'inherit'] });
    const conf = path.join(TEST_DIR, 'empty.conf');
    fs.writeFileSync(conf, '');

    const d = await start(['--artifact', artifact, '--device', 'cpu', '--max-context', '256']);
    const props = (await request(d.base, 'GET', '/props')).json.default_generation_settings.params;
    check(Math.abs(props.temperature - 0.6) < 1e-6 && props.top_k === 20 && Math.abs(props.top_p - 0.95) < 1e-6,
        "/props: the model's generation_config.json defaults (0.6, 20, 0.95)", JSON.stringify(props));
    const api = await apiIds(d, { seed: 7 });
    const run = runText(artifact, ['--seed', '7']);
    check(typeof api.text === 'string' && api.text.length > 0 && api.text === run,
        'same seed, no sampling fields: the API and ninferctl run agree', JSON.stringify([api.text, run]));
    // The comparison discriminates: another seed gives another text (ids outside the tokenizer's
    // 298 pieces read as nothing, so the texts are shorter than 48 tokens but still differ).
    const other = await apiIds(d, { seed: 8 });
    check(other.text !== run, 'another seed gives another text', JSON.stringify([other.text, run]));
    const explicit = await apiIds(d, { seed: 7, temperature: 0.6, top_k: 20, top_p: 0.95 });
    check(explicit.text === api.text, 'and equal the request that spells the model defaults out');
    await d.stop();

    const g = await start(['--artifact', artifact, '--device', 'cpu', '--max-context', '256', '--temperature', '0', '--top-k', '5']);
    const gprops = (await request(g.base, 'GET', '/props')).json.default_generation_settings.params;
    check(gprops.temperature === 0 && gprops.top_k === 5 && Math.abs(gprops.top_p - 0.95) < 1e-6,
        '/props: --temperature and --top-k override the model, top_p still the model\'s', JSON.stringify(gprops));
    const greedy = await apiIds(g, {});
    const greedyText = runText(artifact, ['--greedy']);
    check(greedy.text === greedyText, '--temperature 0: the API answers as ninferctl run --greedy', JSON.stringify([greedy.text, greedyText]));
    const hot = await apiIds(g, { temperature: 0.6, top_k: 20, seed: 7 });
    check(hot.text === api.text, 'a request\'s own temperature and top_k still win over the options', JSON.stringify([hot.text, api.text]));
    await g.stop();

    const bad = spawnSync(process.env.NINFERD, ['--config', conf, '--artifact', artifact, '--temperature', 'hot', '--check-config'],
        { encoding: 'utf8' });
    check(bad.status !== 0 && /temperature.*wants a number in 0\.\.2, got 'hot'/.test(bad.stderr), 'a bad --temperature is a clear error',
        bad.stderr);
});
