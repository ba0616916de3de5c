// ninfer black-box test helpers for real coding agents: a logging HTTP proxy between an agent and
// ninferd that records every request (method, path, status, bodies) and refuses and records every
// attempt to reach another host (CONNECT, absolute URLs: the agents get it as HTTP(S)_PROXY), and
// checkers for the two SSE dialects the agents read (Anthropic Messages, OpenAI Responses).
'use strict';
const http = require('http');

// startProxy(targetPort) -> { port, exchanges: [{method, url, status, requestBody, responseText,
// responseHeaders}], outbound: [host...], reset(), close() }.
function startProxy(targetPort) {
    const exchanges = [];
    const outbound = [];
    const server = http.createServer((req, res) => {
        if (/^https?:\/\//.test(req.url)) { // a plain-HTTP request for another host, sent to us as its proxy
            outbound.push(req.url);
            res.writeHead(403).end();
            return;
        }
        const body = [];
        req.on('data', (c) => body.push(c));
        req.on('end', () => {
            const requestBody = Buffer.concat(body);
            const up = http.request({ host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers }, (ur) => {
                res.writeHead(ur.statusCode, ur.headers);
                const out = [];
                ur.on('data', (c) => { out.push(c); res.write(c); });
                ur.on('end', () => {
                    res.end();
                    exchanges.push({ method: req.method, url: req.url, status: ur.statusCode, requestBody: requestBody.toString(),
                        responseHeaders: ur.headers, responseText: Buffer.concat(out).toString() });
                });
            });
            up.on('error', (e) => {
                exchanges.push({ method: req.method, url: req.url, status: 0, requestBody: requestBody.toString(), responseText: String(e) });
                res.writeHead(502).end();
            });
            up.end(requestBody);
        });
    });
    server.on('connect', (req, socket) => { // an HTTPS tunnel to another host: refused
        outbound.push(req.url);
        socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
    });
    return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
        port: server.address().port, exchanges, outbound,
        reset() { exchanges.length = 0; outbound.length = 0; },
        close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
    })));
}

// SSE text -> [{event, data, raw}]; comment lines (": ping") are skipped. Throws on a frame that
// is neither a comment nor event/data lines, or whose data is not JSON.
function sseFrames(text) {
    const frames = [];
    for (const block of text.split('\n\n')) {
        const lines = block.split('\n').filter((l) => l !== '' && !l.startsWith(':'));
        if (lines.length === 0) continue;
        let event = null;
        const data = [];
        for (const line of lines) {
            if (line.startsWith('event: ')) event = line.slice(7);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
            else throw new Error('not an SSE line: ' + JSON.stringify(line.slice(0, 120)));
        }
        if (data.length === 0) throw new Error('an SSE frame without data: ' + JSON.stringify(block.slice(0, 120)));
        const joined = data.join('\n');
        frames.push({ event, data: joined === '[DONE]' ? '[DONE]' : JSON.parse(joined), raw: block });
    }
    return frames;
}

// Anthropic Messages stream: named events whose name is the data's type, message_start first,
// content blocks opened/closed in index order, one message_delta with a stop_reason, message_stop
// last, no error event. Returns {stop_reason, blocks: [type...]} or throws with the reason.
function checkAnthropicStream(text) {
    const frames = sseFrames(text).filter((f) => f.event !== 'ping');
    if (frames.length === 0) throw new Error('no events');
    for (const f of frames) if (f.event !== f.data.type) throw new Error(`event ${f.event} carries type ${f.data.type}`);
    if (frames[0].event !== 'message_start') throw new Error('first event ' + frames[0].event);
    if (frames[frames.length - 1].event !== 'message_stop') throw new Error('last event ' + frames[frames.length - 1].event);
    const error = frames.find((f) => f.event === 'error');
    if (error) throw new Error('error event: ' + JSON.stringify(error.data));
    const blocks = [];
    let open = -1;
    let stopReason = null;
    for (const f of frames.slice(1, -1)) {
        if (f.event === 'content_block_start') {
            if (open !== -1 || f.data.index !== blocks.length) throw new Error('block start out of order at ' + f.data.index);
            blocks.push(f.data.content_block.type);
            open = f.data.index;
        } else if (f.event === 'content_block_delta') {
            if (f.data.index !== open) throw new Error('delta for block ' + f.data.index + ' while ' + open + ' is open');
        } else if (f.event === 'content_block_stop') {
            if (f.data.index !== open) throw new Error('stop for block ' + f.data.index + ' while ' + open + ' is open');
            open = -1;
        } else if (f.event === 'message_delta') {
            if (stopReason !== null || open !== -1) throw new Error('message_delta repeated or inside a block');
            stopReason = f.data.delta.stop_reason;
        } else {
            throw new Error('unexpected event ' + f.event);
        }
    }
    if (!stopReason) throw new Error('no stop_reason');
    return { stop_reason: stopReason, blocks };
}

// OpenAI Responses stream: every event named by its data's type, sequence_number 0, 1, 2, ...,
// response.created first, one terminal event (completed / incomplete) last. Returns the final
// response object or throws with the reason.
function checkResponsesStream(text) {
    const frames = sseFrames(text);
    if (frames.length === 0) throw new Error('no events');
    frames.forEach((f, i) => {
        if (f.event !== f.data.type) throw new Error(`event ${f.event} carries type ${f.data.type}`);
        if (f.data.sequence_number !== i) throw new Error(`event ${i} has sequence_number ${f.data.sequence_number}`);
    });
    if (frames[0].event !== 'response.created') throw new Error('first event ' + frames[0].event);
    const last = frames[frames.length - 1];
    if (last.event !== 'response.completed' && last.event !== 'response.incomplete')
        throw new Error('last event ' + last.event + ' ' + JSON.stringify(last.data).slice(0, 300));
    const terminal = frames.filter((f) => /^response\.(completed|incomplete|failed)$/.test(f.event));
    if (terminal.length !== 1) throw new Error(terminal.length + ' terminal events');
    return last.data.response;
}

module.exports = { startProxy, sseFrames, checkAnthropicStream, checkResponsesStream };
