// ninfer black-box test - ninferd's command line and start-up: --help/--version/--check-config from
// the option table, clear refusals (unknown option, bad value, config file:line, memory deficit),
// SIGHUP reloading the API key from the config file, and CORS preflights.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { main, check, request, sleep, TEST_DIR } = require('./harness');

function run(args) {
    const r = spawnSync(process.env.NINFERD, args, { encoding: 'utf8', timeout: 120000 });
    return { code: r.status, out: r.stdout, err: r.stderr };
}

main('startup', async (start) => {
    const artifact = process.env.NINFER_TINY_ARTIFACT;
    const empty = path.join(TEST_DIR, 'none.conf');
    fs.writeFileSync(empty, '');
    const help = run(['--help']);
    check(help.code === 0 && /--max-concurrency N/.test(help.out) && /--drain-timeout-s SECONDS/.test(help.out), '--help lists the table');
    check(/^ninferd \d+\.\d+\.\d+/.test(run(['--version']).out), '--version');
    const ok = run(['--config', empty, '--artifact', artifact, '--api-key', 'hunter2', '--check-config']);
    check(ok.code === 0 && /^max-concurrency = 4$/m.test(ok.out) && /configuration OK/.test(ok.out) && !ok.out.includes('hunter2'),
        '--check-config prints the effective settings, key redacted', ok.out + ok.err);
    const unknown = run(['--config', empty, '--artifact', artifact, '--bogus']);
    check(unknown.code === 2 && /unknown option '--bogus'/.test(unknown.err), 'unknown option: exit 2 with a message', unknown.err);
    const range = run(['--config', empty, '--artifact', artifact, '--max-concurrency', '9']);
    check(range.code === 2 && /'max-concurrency' must be in 1\.\.8/.test(range.err), 'out-of-range value: exit 2', range.err);
    const badConf = path.join(TEST_DIR, 'bad.conf');
    fs.writeFileSync(badConf, 'port = 1\nmax-contxt = 5\n');
    const conf = run(['--config', badConf, '--artifact', artifact]);
    check(conf.code === 2 && conf.err.includes('bad.conf:2: unknown option \'max-contxt\''), 'config file error names file:line', conf.err);
    const huge = run(['--config', empty, '--artifact', artifact, '--max-context', '262144', '--max-concurrency', '8',
        '--kv-capacity', '900000000000']);
    check(huge.code === 1 && /deficit/.test(huge.err), 'a plan that does not fit: exit 1 naming the deficit', huge.err.slice(-300));
    const missing = run(['--config', empty, '--artifact', path.join(TEST_DIR, 'nope.ninfer')]);
    check(missing.code === 1 && /nope\.ninfer/.test(missing.err), 'missing artifact: exit 1 naming it', missing.err.slice(-200));

    // SIGHUP re-reads the key; CORS answers preflights for the allowed origin only.
    const keyConf = path.join(TEST_DIR, 'keys.conf');
    fs.writeFileSync(keyConf, 'api-key = first\ncors-origins = http://ui.example\n');
    const d = await start(['--config', keyConf]);
    const auth = (k) => request(d.base, 'GET', '/v1/models', { headers: { authorization: 'Bearer ' + k } });
    check((await auth('first')).status === 200, 'key from the config file');
    fs.writeFileSync(keyConf, 'api-key = second\ncors-origins = http://ui.example\nmax-concurrency = 2\n');
    d.proc.kill('SIGHUP');
    await sleep(300);
    check((await auth('first')).status === 401 && (await auth('second')).status === 200, 'SIGHUP reloads the API key');
    check(/max-concurrency changed from '4' to '2': needs a restart/.test(d.log()) && !d.log().includes('second'),
        'SIGHUP logs a restart-only option change (and never a key)', d.log().slice(-600));
    const pre = await request(d.base, 'OPTIONS', '/v1/chat/completions', { headers: { origin: 'http://ui.example',
        'access-control-request-method': 'POST' } });
    check(pre.status === 204 && pre.headers['access-control-allow-origin'] === 'http://ui.example' &&
        /POST/.test(pre.headers['access-control-allow-methods']), 'CORS preflight for an allowed origin');
    const other = await request(d.base, 'GET', '/health', { headers: { origin: 'http://evil.example' } });
    check(other.status === 200 && !other.headers['access-control-allow-origin'], 'no CORS headers for other origins');
    check((await d.stop()).code === 0, 'exit 0');
});
