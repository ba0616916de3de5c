// ninfer black-box test - files that are not regular files, named where ninferd reads a file
// (issue 30 items 5 and 6): a directory as the config file is refused at start-up, by
// --check-config and on SIGHUP (which keeps the running settings, api-key included, and logs why);
// a FIFO as the config, key file or artifact is refused at once instead of blocking the start,
// and a FIFO key file on SIGHUP neither blocks the HTTP loop nor drops the key. (Slot files and
// upgrade sources: file_fifos.py.)
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { main, check, request, sleep, TEST_DIR } = require('./harness');

function mkfifo(p) {
    if (spawnSync('mkfifo', [p]).status !== 0) throw new Error('mkfifo ' + p);
    return p;
}

// A request that must be answered within 5 s: a blocked loop fails the check instead of the run.
const within5s = (promise) => Promise.race([promise, sleep(5000).then(() => ({ status: 'no answer in 5 s' }))]);

function run(args) {
    const r = spawnSync(process.env.NINFERD, args, { encoding: 'utf8', timeout: 20000 });
    return { code: r.status, out: r.stdout, err: r.stderr, timedOut: r.error && r.error.code === 'ETIMEDOUT' };
}

main('file_attacks', async (start) => {
    const artifact = process.env.NINFER_TINY_ARTIFACT;
    const dir = path.join(TEST_DIR, 'conf-dir');
    fs.mkdirSync(dir);

    // A directory as the config file: fail closed everywhere.
    const started = run(['--config', dir, '--artifact', artifact, '--port', '0']);
    check(started.code === 2 && /conf-dir: not a regular file \(a directory\)/.test(started.err),
        'start-up with a directory as --config: exit 2 naming it', `${started.code} ${started.err}`);
    const checked = run(['--config', dir, '--artifact', artifact, '--check-config']);
    check(checked.code === 2 && /not a regular file/.test(checked.err) && !/configuration OK/.test(checked.out),
        '--check-config rejects a directory as the config file', `${checked.code} ${checked.err}`);
    const dropin = path.join(TEST_DIR, 'main.conf');
    fs.writeFileSync(dropin, '');
    fs.mkdirSync(dropin + '.d/evil.conf', { recursive: true });
    const drop = run(['--config', dropin, '--artifact', artifact, '--check-config']);
    check(drop.code === 2 && /evil\.conf: not a regular file/.test(drop.err), 'a directory among the drop-ins is refused',
        `${drop.code} ${drop.err}`);

    // SIGHUP with the config file replaced by a directory keeps the running key.
    const conf = path.join(TEST_DIR, 'keyed.conf');
    fs.writeFileSync(conf, 'api-key = sesame\n');
    const d = await start(['--config', conf]);
    const models = (key) => request(d.base, 'GET', '/v1/models', key ? { headers: { authorization: 'Bearer ' + key } } : {});
    check((await models()).status === 401 && (await models('sesame')).status === 200, 'the key from the config file is required');
    fs.rmSync(conf);
    fs.mkdirSync(conf);
    d.proc.kill('SIGHUP');
    await sleep(300);
    check((await models()).status === 401 && (await models('sesame')).status === 200,
        'SIGHUP with a directory as the config file keeps the key');
    check(/reload refused, keeping the running settings: config: .*keyed\.conf: not a regular file \(a directory\)/.test(d.log()),
        'SIGHUP logs why the reload was refused', d.log().slice(-400));
    check((await d.stop()).code === 0, 'exit 0');

    // FIFOs (nobody ever writes them): refused at once, never waited on.
    const fifo = mkfifo(path.join(TEST_DIR, 'fifo'));
    const plain = path.join(TEST_DIR, 'plain.conf');
    fs.writeFileSync(plain, '');
    for (const [label, args] of [['config', ['--config', fifo, '--artifact', artifact]],
        ['api-key-file', ['--config', plain, '--artifact', artifact, '--api-key-file', fifo]],
        ['artifact', ['--config', plain, '--artifact', fifo, '--port', '0']]]) {
        const r = run([...args, '--check-config']);
        check(!r.timedOut && r.code !== 0 && /fifo: not a regular file \(a FIFO\)/.test(r.err),
            `a FIFO as the ${label}: --check-config refuses it at once`, `${r.code} ${r.timedOut ? 'timed out' : r.err}`);
    }
    const startFifo = run(['--config', plain, '--artifact', fifo, '--port', '0', '--control-socket', path.join(TEST_DIR, 'c.sock')]);
    check(!startFifo.timedOut && startFifo.code !== 0 && /not a regular file \(a FIFO\)/.test(startFifo.err),
        'a FIFO as the artifact: start-up exits at once naming it', `${startFifo.code} ${startFifo.timedOut ? 'timed out' : startFifo.err}`);

    const keyConf = path.join(TEST_DIR, 'keyfile.conf');
    const keyFile = path.join(TEST_DIR, 'keys.txt');
    fs.writeFileSync(keyFile, 'opensesame\n');
    fs.writeFileSync(keyConf, `api-key-file = ${keyFile}\n`);
    const k = await start(['--config', keyConf]);
    const auth = (key) => within5s(request(k.base, 'GET', '/v1/models', key ? { headers: { authorization: 'Bearer ' + key } } : {}));
    check((await auth('opensesame')).status === 200, 'the key from the key file is accepted');
    fs.writeFileSync(keyConf, `api-key-file = ${fifo}\n`);
    k.proc.kill('SIGHUP');
    await sleep(300);
    check((await within5s(request(k.base, 'GET', '/health'))).status === 200, 'SIGHUP with a FIFO key file: the HTTP loop still answers');
    check((await auth()).status === 401 && (await auth('opensesame')).status === 200, 'SIGHUP with a FIFO key file keeps the key');
    check(/reload refused.*fifo: not a regular file \(a FIFO\)/.test(k.log()), 'SIGHUP logs the FIFO key file', k.log().slice(-300));
    check((await k.stop()).code === 0, 'exit 0 after the FIFO reload');
});
