/* chatkit-trace report: the page's script (inlined; no network, works from file://).
 *
 * Data: #ck-index (JSON: runs, findings, catalogue) and, per session, two
 * gzip-compressed JSON blobs (base64) decoded with DecompressionStream when
 * first needed: s<N> (events in replay order with facts, admission results
 * and snapshot edit operations, run timelines, live-vs-history comparisons)
 * and d<N> (request/response headers and bodies, raw frame bytes).
 * Lists are virtual: only the rows on screen exist in the DOM.
 */
(() => {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const INDEX = JSON.parse($('ck-index').textContent);
  const RUNS = INDEX.runs;
  const FINDINGS = INDEX.findings;
  const IDEMPOTENT = new Set(['duplicate-event', 'no-change']);
  const BAD_STATES = new Set({{problem_states}});
  const ROW_H = 24;

  // ------------------------------------------------------------------ helpers
  function esc(s) {
    return String(s == null ? '' : s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  }
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    if (attrs) for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else if (k === 'html') e.innerHTML = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids) if (k != null) e.append(k);
    return e;
  }
  function statusClass(st) { return 'st-' + String(st || '').replace(/\s+/g, '-'); }
  function fmtMs(ms) {
    if (ms == null) return '';
    const s = ms / 1000;
    return (s >= 0 ? '+' : '') + s.toFixed(3) + 's';
  }
  function fmtDur(s) { return s == null ? '' : s < 1 ? (s * 1000).toFixed(0) + ' ms' : s.toFixed(2) + ' s'; }
  function short(v, n) { const s = typeof v === 'string' ? v : JSON.stringify(v); return s == null ? '' : s.length > n ? s.slice(0, n - 1) + '…' : s; }
  function pretty(text, limit) {
    if (text == null) return '';
    let s = text;
    try { s = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* not JSON: as it is */ }
    const lines = s.split('\n');
    return lines.length > limit ? lines.slice(0, limit).join('\n') + `\n… ${lines.length - limit} more lines` : s;
  }
  function hexdump(bytes, limit = 4096) {
    const out = [];
    for (let off = 0; off < Math.min(bytes.length, limit); off += 16) {
      const chunk = bytes.subarray(off, off + 16);
      const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, '0')).join(' ');
      const txt = Array.from(chunk, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
      out.push(off.toString(16).padStart(8, '0') + '  ' + hex.padEnd(47) + '  ' + txt);
    }
    if (bytes.length > limit) out.push(`… ${bytes.length - limit} more bytes`);
    return out.join('\n');
  }
  function sseBlock(event, id, text) {
    const lines = [];
    if (event) lines.push('event: ' + event);
    if (id != null) lines.push('id: ' + id);
    for (const line of (text || '').split('\n')) lines.push('data: ' + line);
    return lines.join('\n') + '\n\n';
  }
  function b64bytes(s) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(s);
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function bodyBytes(b) {
    if (!b) return null;
    if (b.b != null) return b64bytes(b.b);
    if (b.t != null) return new TextEncoder().encode(b.t);
    return null;
  }

  // ------------------------------------------------------------------ data blobs
  async function gunzipJSON(id) {
    const node = $(id);
    if (!node) throw new Error('the report has no data block ' + id);
    if (typeof DecompressionStream === 'undefined') {
      throw new Error('this browser cannot decompress the report\'s frames (DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or newer); the findings above are complete');
    }
    const bytes = b64bytes(node.textContent.trim());
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return JSON.parse(await new Response(stream).text());
  }
  /* Decoded sessions are kept for the few most recently used (a big trace is never held whole). */
  const KEEP = 12;
  const sessionCache = new Map();
  const detailCache = new Map();
  function remember(cache, key, make) {
    let v = cache.get(key);
    if (v) cache.delete(key); else v = make();
    cache.set(key, v);
    while (cache.size > KEEP) cache.delete(cache.keys().next().value);
    return v;
  }
  function session(b) { return remember(sessionCache, b, () => gunzipJSON('s' + b).then((d) => new Session(b, d))); }
  function details(b) { return remember(detailCache, b, () => gunzipJSON('d' + b)); }
  /* For a scan (search): a cached session, or one decoded for the occasion and let go. */
  function peekSession(b) { return sessionCache.has(b) ? sessionCache.get(b) : gunzipJSON('s' + b).then((d) => new Session(b, d)); }

  // ------------------------------------------------------------------ snapshots
  function emptySnap() { return { runs: [], msgs: [], status: 'unknown', hist: false }; }
  function cloneSnap(s) { return { runs: s.runs, msgs: s.msgs.slice(), status: s.status, hist: s.hist }; }
  function cow(s, i) { const m = s.msgs[i]; const c = Object.assign({}, m, { parts: m.parts.slice() }); s.msgs[i] = c; return c; }
  /* The edit operations of chatkit_trace/report/_snapshot.py; objects from the blob are never changed. */
  function applyOps(s, ops) {
    for (const op of ops) {
      switch (op[0]) {
        case 'r': s.runs = op[1]; break;
        case 's': s.status = op[1]; s.hist = op[2]; break;
        case 'm': s.msgs[op[1]] = op[2]; break;
        case 'n': s.msgs.length = op[1]; break;
        case 'p': cow(s, op[1]).parts[op[2]] = op[3]; break;
        case 'q': cow(s, op[1]).parts.length = op[2]; break;
        case 'a': {
          const m = cow(s, op[1]);
          const p = m.parts[op[2]];
          m.parts[op[2]] = Object.assign({}, p, { text: (p.text || '') + op[3] });
          break;
        }
        default: throw new Error('unknown snapshot operation ' + op[0]);
      }
    }
  }
  const EVERY = 256;
  class Session {
    constructor(b, d) {
      this.b = b; this.d = d; this.ev = d.ev; this.n = d.ev.E.length;
      this.cps = new Map(); this.cur = { pos: -1, snap: emptySnap() };
    }
    /* The snapshot after event i: forward from the cursor or the nearest checkpoint. */
    snapAt(i) {
      let c = this.cur;
      if (!(c.pos <= i && i - c.pos <= 4 * EVERY)) {
        let best = -1;
        for (const k of this.cps.keys()) if (k <= i && k > best) best = k;
        if (best >= 0 && (c.pos > i || best > c.pos)) c = { pos: best, snap: cloneSnap(this.cps.get(best)) };
        else if (c.pos > i) c = { pos: -1, snap: emptySnap() };
      }
      const O = this.ev.O;
      while (c.pos < i) {
        c.pos += 1;
        const ops = O[c.pos];
        if (ops) applyOps(c.snap, ops);
        if (c.pos % EVERY === 0 && !this.cps.has(c.pos)) this.cps.set(c.pos, cloneSnap(c.snap));
      }
      this.cur = c;
      return c.snap;
    }
    ref(k) {
      const e = this.ev.E[k], i = this.ev.I[k];
      return i === -1 ? String(e) : i === -2 ? e + ':end' : e + ':' + i;
    }
    kind(k) { const i = this.ev.I[k]; return i === -1 ? 'request' : i === -2 ? 'end' : 'frame'; }
    problem(k) {
      const ev = this.ev;
      if (ev.I[k] < 0) return null;
      const R = ev.R[k];
      if (ev.S[k] === 'error' || (R && !R.frameOnly)) return 'error';
      const F = ev.F[k];
      if (F && F.some((f) => !f[1] && !IDEMPOTENT.has(f[2]))) return 'rejected';
      if (ev.H[k]) return 'lost';
      return null;
    }
  }

  // ------------------------------------------------------------------ virtual list
  class VList {
    constructor(node, { render, open, label }) {
      this.node = node; this.render = render; this.open = open; this.label = label;
      this.count = 0; this.cursor = 0; this.onmove = null;
      this.spacer = el('div', { class: 'spacer' });
      this.win = el('div', { class: 'win' });
      node.append(this.spacer, this.win);
      this.empty = null;
      node.addEventListener('scroll', () => this.paint());
      node.addEventListener('keydown', (e) => this.key(e));
      node.addEventListener('click', (e) => {
        const row = e.target.closest('[data-row]');
        if (!row || e.target.closest('a')) return;
        this.move(Number(row.dataset.row));
        if (this.clickOpens && this.open) this.open(Number(row.dataset.row));
      });
      node.addEventListener('dblclick', (e) => {
        const row = e.target.closest('[data-row]');
        if (row && this.open && !this.clickOpens) this.open(Number(row.dataset.row));
      });
      new ResizeObserver(() => this.paint()).observe(node);
    }
    set(count, cursor = 0, emptyText = '') {
      this.count = count;
      this.cursor = Math.max(0, Math.min(cursor, count - 1));
      this.spacer.style.height = count * ROW_H + 'px';
      this.emptyText = emptyText;
      this.paint(true);
      this.scrollTo(this.cursor, true);
    }
    page() { return Math.max(1, Math.floor(this.node.clientHeight / ROW_H) - 1); }
    scrollTo(i, center) {
      const top = i * ROW_H, h = this.node.clientHeight;
      if (center) this.node.scrollTop = Math.max(0, top - h / 2 + ROW_H);
      else if (top < this.node.scrollTop) this.node.scrollTop = top;
      else if (top + ROW_H > this.node.scrollTop + h) this.node.scrollTop = top + ROW_H - h;
      this.paint();
    }
    move(i, center = false) {
      if (!this.count) return;
      i = Math.max(0, Math.min(this.count - 1, i));
      const changed = i !== this.cursor;
      this.cursor = i;
      this.scrollTo(i, center);
      this.paint(true);
      if (this.onmove) this.onmove(i, changed);
    }
    key(e) {
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      const k = e.key;
      let to = null;
      if (k === 'ArrowDown' || k === 'j') to = this.cursor + 1;
      else if (k === 'ArrowUp' || k === 'k') to = this.cursor - 1;
      else if (k === 'PageDown') to = this.cursor + this.page();
      else if (k === 'PageUp') to = this.cursor - this.page();
      else if (k === 'Home') to = 0;
      else if (k === 'End') to = this.count - 1;
      else if (k === 'Enter' && this.open) { e.preventDefault(); this.open(this.cursor); return; }
      if (to != null) { e.preventDefault(); this.move(to); }
    }
    paint(force) {
      const h = this.node.clientHeight || 400;
      const first = Math.max(0, Math.floor(this.node.scrollTop / ROW_H) - 5);
      const last = Math.min(this.count, first + Math.ceil(h / ROW_H) + 10);
      if (!force && this.first === first && this.last === last) return;
      this.first = first; this.last = last;
      this.win.style.top = first * ROW_H + 'px';
      const frag = document.createDocumentFragment();
      for (let i = first; i < last; i++) {
        const row = this.render(i);
        row.dataset.row = i;
        row.id = this.node.id + '-r' + i;
        row.setAttribute('role', 'option');
        row.setAttribute('aria-selected', i === this.cursor ? 'true' : 'false');
        frag.append(row);
      }
      this.win.replaceChildren(frag);
      if (!this.count && this.emptyText) this.win.append(el('div', { class: 'empty', text: this.emptyText }));
      if (this.count && this.cursor >= first && this.cursor < last) this.node.setAttribute('aria-activedescendant', this.node.id + '-r' + this.cursor);
      else this.node.removeAttribute('aria-activedescendant');
    }
  }

  // ------------------------------------------------------------------ runs and filters
  const runFindings = RUNS.map(() => []);
  // a run's findings, and the trace-wide ones whose decisive frame is on its timeline
  FINDINGS.forEach((f, i) => { if (f.run != null) runFindings[f.run].push(i); });
  const state = { view: 'runs', filtered: [], run: null, sess: null, rows: null, raw: false, textHits: new Map(), finding: -1 };

  function fillCodes() {
    const sel = $('f-code');
    const codes = Object.keys(INDEX.summary.by_code || {}).sort();
    for (const c of codes) {
      const info = INDEX.catalogue[c] || {};
      sel.append(el('option', { value: c, text: `${c} (${INDEX.summary.by_code[c]}) ${info.when || ''}` }));
    }
  }
  function words() { return $('q').value.toLowerCase().split(/\s+/).filter(Boolean); }
  function findingMatches(f, code, sev, ws) {
    if (code && !f.code.startsWith(code)) return false;
    if (sev && f.sev !== sev) return false;
    for (const w of ws) {
      const hay = (f.code + ' ' + f.msg + ' ' + (f.s || '') + ' ' + (f.r || '')).toLowerCase();
      if (!hay.includes(w)) return false;
    }
    return true;
  }
  function runMatches(i, code, sev, status, ws) {
    const r = RUNS[i];
    if (status) {
      if (status === 'problems') {
        if (!(r.e || r.rj || r.st === 'failed' || r.st === 'outcome unknown' || r.st === 'recording incomplete' || r.st === 'not started')) return false;
      } else if (r.st !== status) return false;
    }
    if (code || sev) {
      if (!runFindings[i].some((j) => findingMatches(FINDINGS[j], code, sev, []))) return false;
    }
    for (const w of ws) {
      const hay = (r.s + ' ' + r.r + ' ' + r.st + ' ' + r.out).toLowerCase();
      if (hay.includes(w)) continue;
      if (runFindings[i].some((j) => (FINDINGS[j].msg + ' ' + FINDINGS[j].code).toLowerCase().includes(w))) continue;
      const hits = state.textHits.get(w);
      if (hits instanceof Set && r.x.some((x) => hits.has(r.b + ':' + x))) continue;
      return false;
    }
    return true;
  }
  let searchToken = 0;
  /* Words of three letters or more are searched in every frame's text too (each session decoded in turn). */
  async function searchText(pending) {
    if (!pending.length) return;
    const token = ++searchToken;
    const found = new Map(pending.map((w) => [w, new Set()]));
    for (let b = 0; b < INDEX.blobs.length; b++) {
      const s = await peekSession(b);
      const X = s.ev.X, E = s.ev.E;
      for (let k = 0; k < s.n; k++) {
        const t = X[k];
        if (!t) continue;
        const low = t.toLowerCase();
        for (const w of pending) if (low.includes(w)) found.get(w).add(b + ':' + E[k]);
      }
      if (b % 32 === 31) await new Promise((r) => setTimeout(r, 0));
    }
    for (const [w, set] of found) state.textHits.set(w, set);
    if (token === searchToken) applyFilter();
  }
  function applyFilter(keep) {
    const code = $('f-code').value, sev = $('f-sev').value, status = $('f-status').value, ws = words();
    const pending = ws.filter((w) => w.length >= 3 && !state.textHits.has(w));
    for (const w of pending) state.textHits.set(w, 'pending');
    const before = runsList.count ? state.filtered[runsList.cursor] : null;
    state.filtered = [];
    for (let i = 0; i < RUNS.length; i++) if (runMatches(i, code, sev, status, ws)) state.filtered.push(i);
    let cursor = state.filtered.indexOf(keep != null ? keep : before);
    $('runs').style.height = (Math.max(3, Math.min(state.filtered.length, 18)) * ROW_H + 2) + 'px';
    runsList.set(state.filtered.length, cursor < 0 ? 0 : cursor,
      RUNS.length ? 'no run matches the filter (Esc clears it)' : 'no run in this trace (no exchange matched a run route of the profile)');
    const pendingSearch = ws.some((w) => state.textHits.get(w) === 'pending');
    const count = $('runs-count');
    count.textContent = `${state.filtered.length} of ${RUNS.length} run(s)` + (pendingSearch ? ' · searching frame text…' : '');
    count.dataset.q = ws.join(' ');
    count.dataset.busy = pendingSearch ? '1' : '';
    const table = $('findings-table');
    if (table) {
      let shown = 0;
      for (const tr of table.tBodies[0].rows) {
        const ok = findingMatches(FINDINGS[Number(tr.dataset.i)], code, sev, ws);
        tr.hidden = !ok;
        if (ok) shown++;
      }
      $('summary-h').textContent = shown === FINDINGS.length ? `Findings (${FINDINGS.length})` : `Findings (${shown} of ${FINDINGS.length})`;
    }
    searchText(pending).catch(fail);
  }
  function runLink(i, frame) {
    const r = RUNS[i];
    const p = new URLSearchParams();
    p.set('session', r.s); p.set('run', r.r);
    if (frame != null) p.set('frame', frame);
    return '#' + p.toString().replace(/%3A/g, ':');
  }
  function renderRun(k) {
    const i = state.filtered[k];
    const r = RUNS[i];
    const counts = [];
    if (r.e) counts.push(el('span', { class: 'sev-error', text: r.e + 'E ' }));
    if (r.w) counts.push(el('span', { class: 'sev-warning', text: r.w + 'W ' }));
    if (r.i) counts.push(el('span', { class: 'sev-info', text: r.i + 'I ' }));
    return el('div', { class: 'row runs-cols' + (r.e || r.rj ? ' problem' : '') },
      el('span', { text: r.s, title: r.s }),
      el('span', {}, el('a', { href: runLink(i), text: r.r, tabindex: '-1' })),
      el('span', {}, el('span', { class: 'badge ' + statusClass(r.st), text: r.st })),
      el('span', { class: 'muted', text: r.out, title: r.out }),
      el('span', { class: 'num', text: String(r.fr) }),
      el('span', { class: 'num', text: r.fa + ' · ' + r.rj }),
      el('span', { class: 'num', text: fmtDur(r.d) }),
      el('span', {}, ...counts, el('span', { class: 'codes', text: r.codes.join(' ') })));
  }
  const runsList = new VList($('runs'), {
    render: renderRun,
    open: (k) => { if (state.filtered.length) location.hash = runLink(state.filtered[k]); },
  });
  runsList.clickOpens = true; // a run's row is a link

  // ------------------------------------------------------------------ routing
  function params() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ''));
    return { session: p.get('session'), run: p.get('run'), frame: p.get('frame') };
  }
  function findRun(session, run) {
    for (let i = 0; i < RUNS.length; i++) if (RUNS[i].r === run && (session == null || RUNS[i].s === session)) return i;
    return -1;
  }
  function showRuns() {
    state.view = 'runs';
    delete document.documentElement.dataset.run;
    delete document.documentElement.dataset.frame;
    $('run-view').hidden = true;
    $('runs-view').hidden = false;
    $('summary').hidden = false;
    document.title = INDEX.title;
  }
  async function route() {
    const h = params();
    if (h.run == null) {
      const back = state.view === 'run' ? state.run : null;
      showRuns();
      if (back != null) { applyFilter(back); $('runs').focus(); }
      return;
    }
    const i = findRun(h.session, h.run);
    if (i < 0) {
      showRuns();
      notice(`This report has no run ${h.run}${h.session ? ' in session ' + h.session : ''}.`);
      return;
    }
    await openRun(i, h.frame);
  }
  function notice(text) {
    let n = $('route-notice');
    if (!n) { n = el('p', { id: 'route-notice', class: 'notice', role: 'status' }); $('runs-view').prepend(n); }
    n.textContent = text;
  }

  // ------------------------------------------------------------------ a run
  const timeline = new VList($('timeline'), { render: renderRow, open: () => toggleRaw() });
  timeline.onmove = (i) => selectRow(i);
  const findingRefs = new Map(); // ref -> finding indices of the open run

  async function openRun(i, frame) {
    const r = RUNS[i];
    state.view = 'run';
    $('runs-view').hidden = true; $('summary').hidden = true; $('run-view').hidden = false;
    document.title = `${r.r} · ${INDEX.title}`;
    if (state.run !== i || !state.sess) {
      state.run = i; state.finding = -1;
      $('run-h').textContent = `Run ${r.r}`;
      $('run-meta').replaceChildren(
        el('span', { class: 'badge ' + statusClass(r.st), text: r.st }), ' ',
        `session ${r.s} · ${r.out} · origin ${r.o || '-'} · ${r.fr} frame(s), ${r.fa} fact(s), ${r.rj} rejected` + (r.d != null ? ` · ${fmtDur(r.d)}` : ''));
      $('tl-count').textContent = 'loading…';
      state.sess = null;
      const s = await session(r.b);
      if (state.run !== i) return;
      state.sess = s;
      const segs = s.d.runs[r.k].rows;
      let n = 0;
      for (const [, len] of segs) n += len;
      const rows = new Int32Array(n);
      let j = 0;
      for (const [a, len] of segs) for (let q = 0; q < len; q++) rows[j++] = a + q;
      state.rows = rows;
      state.t0 = n ? s.ev.T[rows[0]] : 0;
      findingRefs.clear();
      for (const fi of runFindings[i]) for (const ref of FINDINGS[fi].frames) {
        if (!findingRefs.has(ref)) findingRefs.set(ref, []);
        findingRefs.get(ref).push(fi);
      }
      state.problems = [];
      for (let q = 0; q < n; q++) if (s.problem(rows[q])) state.problems.push(q);
      $('tl-count').textContent = `${n} row(s)` + (state.problems.length ? ` · ${state.problems.length} problem(s)` : '');
      const scrub = $('scrub');
      scrub.max = String(Math.max(0, n - 1));
      renderRunFindings();
      renderCompare();
      timeline.set(n, 0, 'no frames in this run');
    }
    const row = frame != null ? rowOf(frame) : 0;
    if (frame != null && row == null) notice2(`frame ${frame} is not in this run's timeline`);
    timeline.move(row == null ? 0 : row, true);
    selectRow(timeline.cursor);
    document.documentElement.dataset.run = r.s + '/' + r.r;
  }
  function notice2(text) { $('tl-count').textContent = text; }
  /* The row of a frame reference (as the viewer's Timeline.nearest): exact, else the exchange's nearest row. */
  function rowOf(ref) {
    const s = state.sess, rows = state.rows;
    if (!s || !rows) return null;
    const m = /^(\d+)(?::(\d+|end))?$/.exec(String(ref));
    if (!m) return null;
    const ex = Number(m[1]);
    const idx = m[2] == null ? -1 : m[2] === 'end' ? -2 : Number(m[2]);
    let best = null, first = null;
    for (let q = 0; q < rows.length; q++) {
      const k = rows[q];
      if (s.ev.E[k] !== ex) continue;
      const i = s.ev.I[k];
      if (i === idx) return q;
      if (first == null) first = q;
      if (idx >= 0 && (i === -1 || (i >= 0 && i <= idx))) best = q;
    }
    return best != null ? best : first;
  }
  function factSpan(f) {
    const [kind, ok, reason] = f;
    if (ok) return el('span', { class: 'fact ok', text: kind + ' ✓' });
    if (IDEMPOTENT.has(reason)) return el('span', { class: 'fact idem', text: `${kind} · ${reason}` });
    return el('span', { class: 'fact bad', text: `${kind} ✗ ${reason}` });
  }
  function renderRow(q) {
    const s = state.sess, k = state.rows[q], ev = s.ev;
    const ex = s.d.x[ev.E[k]] || {};
    const ref = s.ref(k);
    const what = el('span', {});
    const marks = findingRefs.get(ref);
    if (marks) what.append(el('span', { class: 'marker', text: '◆ ' + [...new Set(marks.map((fi) => FINDINGS[fi].code))].join(' ') }));
    const I = ev.I[k];
    if (I === -1) {
      const after = ex.cur && (ex.cap === 'resume' || ex.cap === 'subscribe') ? ` after ${ex.cur}` : '';
      what.append(`→ ${ex.m} ${ex.p} `, el('span', { class: 'muted', text: `${ex.cap || 'unmatched'}${after} · ` }),
        el('span', { class: ex.st == null || ex.st >= 400 ? 'tone-error' : '', text: ex.st == null ? 'no status' : String(ex.st) }));
      if (ex.hist) what.append(' ', el('span', { class: ex.hist.ok ? 'tone-ok' : 'tone-error', text: ex.hist.ok ? `history: ${ex.hist.n} message(s)` : 'history rejected' }));
      if (ex.disp && ex.disp !== 'accepted') what.append(el('span', { class: 'muted', text: ' · dispatch ' + ex.disp }));
    } else if (I === -2) {
      what.append(el('span', { class: 'muted', text: ex.cap === 'subscribe' ? '■ end of subscription: ' : '■ end of stream: ' }), ex.end || 'complete');
      if (ex.err) what.append(el('span', { class: 'tone-error', text: ' ' + ex.err }));
    } else {
      const st = ev.S[k];
      if (st && st !== 'admitted') what.append(el('span', { class: BAD_STATES.has(st) ? 'tone-error' : 'muted', text: st + ' ' }));
      const R = ev.R[k];
      if (R && !R.frameOnly) what.append(el('span', { class: 'tone-error', text: '✗ ' + (R.kind || 'error') + ' ' }));
      for (const f of ev.F[k] || []) what.append(factSpan(f));
      const H = ev.H[k];
      if (H) what.append(el('span', { class: 'lost', text: `lost ×${H.length} ` }));
      if (ev.U[k]) what.append(el('span', { class: 'muted', text: `unknown ${ev.U[k]} ` }));
      const X = ev.X[k];
      if (X) what.append(el('span', { class: 'muted', text: short(X, 160) }));
    }
    const p = s.problem(k);
    return el('div', { class: 'row tl-row' + (p ? ' problem' : marks ? ' finding' : ''), 'data-ref': ref },
      el('span', { text: ref }), el('span', { class: 'num muted', text: fmtMs(ev.T[k] - state.t0) }), what);
  }

  function selectRow(q) {
    const s = state.sess;
    if (!s || !state.rows.length) {
      $('snap-ref').textContent = '-'; $('snap-head').replaceChildren(); $('snap-msgs').replaceChildren(el('p', { class: 'muted', text: 'no frames' }));
      $('detail-h').textContent = ''; $('detail-body').replaceChildren();
      return;
    }
    const k = state.rows[q];
    const ref = s.ref(k);
    const scrub = $('scrub');
    if (Number(scrub.value) !== q) scrub.value = String(q);
    $('scrub-pos').textContent = `${q + 1} / ${state.rows.length}`;
    scrub.setAttribute('aria-valuetext', `row ${q + 1} of ${state.rows.length}, frame ${ref}`);
    const snap = s.snapAt(k);
    renderSnapshot(snap, ref, s.ev.V[k]);
    renderDetail(k, snap);
    const p = new URLSearchParams(location.hash.replace(/^#/, ''));
    if (p.get('frame') !== ref) history.replaceState(null, '', runLink(state.run, ref));
    document.documentElement.dataset.frame = ref;
  }

  function runLine(v, id) {
    if (!v) return el('div', {}, el('b', { text: id }), el('span', { class: 'muted', text: ' not in the snapshot yet' }));
    const st = v.status === 'running' && v.connection === 'disconnected' ? 'outcome unknown' : v.status;
    const line = el('div', {}, el('b', { text: v.id }), ' ', el('span', { class: 'badge ' + statusClass(st), text: st }),
      el('span', { class: 'muted', text: ` phase ${v.phase} · connection ${v.connection} · ${v.origin}` }));
    if (v.error) line.append(el('div', { class: 'tone-error', text: `error ${v.error.code}: ${v.error.message}` }));
    if (v.interruptReason) line.append(el('div', { class: 'tone-warning', text: 'interrupted: ' + v.interruptReason }));
    if (v.abort) line.append(el('div', { class: 'muted', text: `stop requested · remote ${v.abort.remote}` + (v.abort.outputSealed ? ' · output sealed' : '') }));
    if (v.workItems) for (const [wid, w] of Object.entries(v.workItems)) line.append(el('div', { class: 'muted', text: `work item ${wid}: ${w.status || ''}` }));
    return line;
  }
  function partNode(p) {
    const head = el('span', { class: 'ptype', text: `[${p.type || '?'} ${p.id == null ? '?' : p.id}] ` });
    if (p.text != null) {
      let t = typeof p.text === 'string' ? p.text : JSON.stringify(p.text);
      if (t.length > 4000) t = `… ${t.length - 4000} earlier characters\n` + t.slice(-4000);
      return el('div', { class: 'part' }, head, el('span', { class: 'text', text: t }));
    }
    const v = p.v || {};
    let body;
    if (p.type === 'tool-call') {
      body = `${v.toolName} · ${v.status}` + (v.args !== undefined ? ` · args ${short(v.args, 300)}` : '') +
        (v.result !== undefined ? ` → ${short(v.result, 300)}` : '') + (v.error !== undefined ? ` · error ${short(v.error, 200)}` : '');
    } else body = short(v, 600);
    return el('div', { class: 'part' }, head, el('span', { class: 'value', text: body }));
  }
  function renderSnapshot(snap, ref, version) {
    const r = RUNS[state.run];
    $('snap-ref').textContent = ref;
    const head = [runLine(snap.runs.find((x) => x.id === r.r), r.r)];
    const others = snap.runs.filter((x) => x.id !== r.r);
    if (others.length) head.push(el('div', { class: 'muted', text: 'other runs: ' + others.slice(-4).map((x) => `${x.id} ${x.status === 'running' && x.connection === 'disconnected' ? 'outcome unknown' : x.status}`).join(', ') + (others.length > 4 ? ` (+${others.length - 4})` : '') }));
    head.push(el('div', { class: 'muted', text: `session ${INDEX.blobs[r.b].sid}: ${snap.status}${snap.hist ? ' · history loaded' : ''} · version ${version}` }));
    $('snap-head').replaceChildren(...head);
    const msgs = snap.msgs;
    const mine = [];
    msgs.forEach((m, i) => { if (m && m.run === r.r) mine.push(i); });
    let lo, hi;
    if (mine.length) { lo = Math.max(0, mine[0] - 2); hi = mine[mine.length - 1] + 1; } else { lo = Math.max(0, msgs.length - 2); hi = msgs.length; }
    if (hi - lo > 40) lo = hi - 40;
    const out = [];
    if (lo > 0) out.push(el('p', { class: 'muted', text: `… ${lo} earlier message(s)` }));
    if (!msgs.length) out.push(el('p', { class: 'muted', text: '(no messages yet)' }));
    for (let i = lo; i < hi; i++) {
      const m = msgs[i];
      if (!m) continue;
      const cur = m.run === r.r || m.run == null;
      out.push(el('div', { class: 'msg' + (cur ? ' current' : ''), 'data-id': m.id },
        el('div', {}, el('span', { class: 'who', text: m.role }), el('span', { class: 'muted', text: ` ${m.id}` + (m.run && m.run !== r.r ? ` (run ${m.run})` : '') })),
        ...m.parts.map(partNode)));
    }
    if (hi < msgs.length) out.push(el('p', { class: 'muted', text: `… ${msgs.length - hi} later message(s)` }));
    const box = $('snap-msgs');
    box.replaceChildren(...out);
    box.scrollTop = box.scrollHeight;
  }

  function briefFact(f) {
    const kind = f.kind || '?';
    if (f.message) {
      const m = f.message;
      const parts = (m.parts || []).map((p) => `${p[1]} ${p[0]}` + (p[2] != null ? ` (${p[2]} chars)` : '')).join(', ');
      return `message ${m.id} (${m.role})` + (f.preview ? ` ${JSON.stringify(f.preview)}` : '') + (parts ? ` · ${parts}` : '');
    }
    if (f.delta != null) return `delta ${f.messageId}/${f.partId} ${JSON.stringify(f.delta)}`;
    if (f.phase) return `phase ${f.phase}`;
    if (f.workItem) return `work-item ${f.workItem.id} ${f.workItem.status || ''}`;
    if (f.error) return `error ${short(f.error, 200)}`;
    if (f.reason) return `reason ${f.reason}`;
    return short(Object.fromEntries(Object.entries(f).filter(([k2]) => k2 !== 'eventId')), 200);
  }
  function renderDetail(k, snap) {
    const s = state.sess, ev = s.ev;
    const ref = s.ref(k);
    const ex = s.d.x[ev.E[k]] || {};
    const I = ev.I[k];
    const body = [];
    const line = (cls, text) => el('div', { class: cls, text });
    $('detail-h').textContent = `${s.kind(k)} ${ref}`;
    if (I === -1) {
      body.push(el('div', {}, el('b', { text: `${ex.m} ${ex.u}` }), ' → ', el('span', { class: ex.st == null || ex.st >= 400 ? 'tone-error' : '', text: ex.st == null ? 'no status' : String(ex.st) })));
      body.push(line('muted', `capability ${ex.cap || '-'} · session ${ex.sid || '-'} · run ${ex.run || '-'}` + (ex.src ? ` (${ex.src})` : '') + (ex.cur ? ` · cursor ${ex.cur}` : '') + (ex.tgt ? ` · replaces ${ex.tgt}` : '')));
      if (ex.disp) body.push(line('', `dispatch ${ex.disp}` + (ex.proj ? `, projected ${ex.proj} user message(s)` : '')));
      if (ex.cap === 'abort') body.push(line('tone-warning', 'the stop request (R9): between the frames before and after it'));
      if (ex.hist) {
        const h = ex.hist;
        const d = el('div', {}, `history read: ${h.n} message(s), `, el('span', { class: h.ok ? 'tone-ok' : 'tone-error', text: h.ok ? 'applied' : `rejected: ${h.error}` }));
        d.append(' · ', el('a', { href: '#cmp-h', onclick: (e) => { e.preventDefault(); $('compare').scrollIntoView(); $('cmp-h').focus(); }, text: 'live vs history' }));
        body.push(d);
      }
      if (ex.err) body.push(line('tone-error', ex.err));
      if (ex.fault) body.push(line('tone-warning', 'fault injected: ' + short(ex.fault, 300)));
      const holder = el('div', {}, line('muted', 'loading the request…'));
      body.push(holder);
      details(s.b).then((d) => {
        const x = d.x[ev.E[k]] || {};
        const kids = [];
        if (x.rqb) {
          kids.push(line('muted', 'request body'));
          kids.push(el('pre', { text: x.rqb.t != null ? pretty(x.rqb.t, 40) : x.rqb.omitted || `(${(x.rqb.b || '').length} base64 characters, binary: see raw bytes)` }));
        }
        if (x.rqh && x.rqh.length) kids.push(el('details', {}, el('summary', { text: `request headers (${x.rqh.length})` }), el('pre', { text: x.rqh.map((h) => h.join(': ')).join('\n') })));
        if (x.rsh && x.rsh.length) kids.push(el('details', {}, el('summary', { text: `response headers (${x.rsh.length})` }), el('pre', { text: x.rsh.map((h) => h.join(': ')).join('\n') })));
        if (x.rsb && x.rsb.t != null) kids.push(el('details', {}, el('summary', { text: 'response body' }), el('pre', { text: pretty(x.rsb.t, 200) })));
        else if (x.rsb && x.rsb.omitted) kids.push(line('muted', 'response body: ' + x.rsb.omitted));
        holder.replaceChildren(...kids);
      });
    } else if (I === -2) {
      body.push(el('div', {}, 'end of the response stream: ', el('b', { text: ex.end || 'complete' }), ex.err ? ` (${ex.err})` : ''));
      const r = RUNS[state.run];
      const v = snap.runs.find((x) => x.id === (ex.run || r.r));
      if (v && v.status === 'running' && v.connection === 'disconnected') body.push(line('tone-error', 'no conclusion arrived: the run is left running, connection lost (outcome unknown, R3.4)'));
      if (ex.stop) body.push(line('muted', `the reader had stopped at frame ${ev.E[k]}:${ex.stop[1]} (${ex.stop[0]})`));
    } else {
      const M = ev.M[k] || [];
      const head = [ref, fmtMs(ev.T[k] - state.t0), `${M[0]} ${M[1]}`];
      if (M[3] != null) head.push('id ' + M[3]);
      if (M[2]) head.push('event ' + M[2]);
      const st = ev.S[k];
      const h = el('div', {}, el('b', { text: head.join('  ') }));
      if (st) h.append('  ', el('span', { class: BAD_STATES.has(st) ? 'tone-error' : 'muted', text: st }));
      if (M[4] != null) h.append(el('span', { class: 'muted', text: `  bytes ${M[4]}–${M[5]}` }));
      body.push(h);
      const R = ev.R[k];
      if (R) {
        body.push(line('tone-error', `✗ ${R.kind || 'error'}${R.offset != null ? ' at byte ' + R.offset : ''}: ${R.message || ''}`));
        if (R.excerpt) body.push(line('muted', '  ' + R.excerpt));
      }
      if (ev.X[k] != null) body.push(el('pre', { text: pretty(ev.X[k], 40) }));
      const F = ev.F[k];
      if (F && F.length) {
        body.push(line('muted', 'facts → admission'));
        for (const f of F) {
          const [kind, ok, reason, detail, fact] = f;
          const d = el('div', {}, '  ', ok ? el('span', { class: 'tone-ok', text: `${kind} ✓ accepted` })
            : IDEMPOTENT.has(reason) ? el('span', { class: 'muted', text: `${kind} · dropped (${reason}, idempotent)` })
              : el('span', { class: 'tone-error', text: `${kind} ✗ rejected: ${reason}` + (detail ? ` (${detail})` : '') }));
          body.push(d, line('muted mono', '    ' + briefFact(fact)));
        }
      }
      const H = ev.H[k];
      if (H) {
        const stop = ex.stop;
        body.push(line('tone-error', `never admitted: the reader had stopped${stop ? ` at ${ev.E[k]}:${stop[1]} (${stop[0]})` : ''}, this output is lost to the UI`));
        for (const f of H) body.push(line('tone-error mono', '    ' + briefFact(f)));
      }
      if (ev.U[k]) body.push(line('muted', `unknown event type ${ev.U[k]}: ignored (R2.4)`));
      if (ev.K[k]) body.push(line('muted', 'an end-of-reader marker'));
      if (!F && !H && !R && st === 'admitted' && !ev.U[k]) body.push(line('muted', 'decoded to no facts'));
    }
    for (const fi of findingRefs.get(ref) || []) {
      const f = FINDINGS[fi];
      body.push(el('div', {}, el('b', { class: 'sev-' + f.sev, text: f.code }), ' ', f.msg));
    }
    $('detail-body').replaceChildren(...body);
    if (state.raw) showRaw(k); else { $('raw').hidden = true; }
  }
  function toggleRaw() {
    state.raw = !state.raw;
    $('raw-btn').setAttribute('aria-expanded', String(state.raw));
    if (state.raw && state.sess && state.rows.length) showRaw(state.rows[timeline.cursor]);
    else $('raw').hidden = true;
  }
  async function showRaw(k) {
    const s = state.sess, ev = s.ev, pre = $('raw');
    pre.hidden = false;
    pre.textContent = 'decoding…';
    const d = await details(s.b);
    if (state.sess !== s || state.rows[timeline.cursor] !== k) return;
    const I = ev.I[k], E = ev.E[k];
    let text;
    if (I === -1) {
      const x = d.x[E] || {};
      const rq = bodyBytes(x.rqb), rs = bodyBytes(x.rsb);
      text = 'request body\n' + (rq ? hexdump(rq) : x.rqb && x.rqb.omitted ? x.rqb.omitted : '(none)') +
        '\n\nresponse body\n' + (rs ? hexdump(rs) : x.rsb && x.rsb.omitted ? x.rsb.omitted : '(none: a stream is its frames)');
    } else if (I === -2) {
      text = '(the end of a stream has no bytes)';
    } else {
      const raw = d.raw[E + ':' + I];
      const M = ev.M[k] || [];
      if (raw && (raw.b != null || raw.t != null)) text = 'raw bytes\n' + hexdump(bodyBytes(raw));
      else {
        const block = M[0] === 'sse' ? sseBlock(M[2], M[3], ev.X[k]) : (ev.X[k] || '');
        text = (M[0] === 'sse' ? 'bytes (the SSE event rebuilt from its stored fields, UTF-8)\n' : 'bytes (the frame text, UTF-8)\n') + hexdump(new TextEncoder().encode(block));
      }
    }
    pre.textContent = text;
  }

  function renderRunFindings() {
    const box = $('run-findings');
    const items = runFindings[state.run];
    if (!items.length) { box.replaceChildren(el('p', { class: 'muted', text: 'No findings for this run.' })); return; }
    box.replaceChildren(...items.map((fi, n) => {
      const f = FINDINGS[fi];
      const info = INDEX.catalogue[f.code] || {};
      const decisive = f.frames[0];
      return el('button', { type: 'button', class: 'finding-item sev-' + f.sev, 'data-code': f.code, 'data-i': String(fi),
        onclick: () => jumpToFinding(n) },
      el('span', { class: 'sev sev-' + f.sev, text: f.sev }), ' ', el('b', { class: 'mono', text: f.code }),
      ` (${f.rule}) ${f.msg}`, el('span', { class: 'muted', text: (f.r == null ? '  · trace-wide' : '') + (decisive ? `  · decisive frame ${decisive}` : '') }),
      el('span', { class: 'rule-text', text: (info.text || info.when || '') }));
    }));
  }
  function jumpToFinding(n) {
    const items = runFindings[state.run];
    if (!items.length) return;
    n = ((n % items.length) + items.length) % items.length;
    state.finding = n;
    const f = FINDINGS[items[n]];
    [...$('run-findings').children].forEach((b, j) => b.setAttribute('aria-current', String(j === n)));
    const row = f.row != null ? f.row : f.frames.length ? rowOf(f.frames[0]) : null;
    if (row == null) { notice2(`frame ${f.frames[0]} is not in this run's timeline`); return; }
    timeline.move(row, true);
    $('timeline').focus();
  }
  function jumpProblem(delta) {
    const ps = state.problems || [];
    if (!ps.length) return;
    const c = timeline.cursor;
    let to = null;
    if (delta > 0) to = ps.find((p) => p > c); else for (const p of ps) if (p < c) to = p;
    if (to == null) to = delta > 0 ? ps[0] : ps[ps.length - 1];
    timeline.move(to, true);
  }
  function renderCompare() {
    const r = RUNS[state.run];
    const box = $('cmp-body');
    const items = (state.sess.d.cmp || []).filter((c) => c.run === r.r);
    if (!items.length) {
      box.replaceChildren(el('p', { class: 'muted', text: 'No history read after this run settled in this trace (record a refresh after a run to compare).' }));
      return;
    }
    box.replaceChildren(...items.map((c) => {
      const table = el('table', {}, el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: c.label }), el('th', { scope: 'col', text: c.title || `history read ${c.hx}` }))));
      const tb = el('tbody');
      for (const [left, right] of c.rows) {
        const n = Math.max(left.length, right.length);
        for (let i = 0; i < n; i++) {
          const a = left[i], b = right[i];
          tb.append(el('tr', {},
            el('td', { class: a && a[1] === 'error' ? 'diff' : '', text: a ? a[0] : '' }),
            el('td', { class: b && b[1] === 'error' ? 'diff' : '', text: b ? b[0] : '' })));
        }
      }
      table.append(tb);
      const diffs = c.diffs.length ? el('ul', {}, ...c.diffs.map((d) => el('li', { class: 'tone-error', text: d })))
        : el('p', { class: 'tone-ok', text: (c.explained || []).length ? 'no difference of its own' : (c.verdict || 'isomorphic: same ids, types and content') });
      const explained = (c.explained || []).length ? el('ul', {}, ...c.explained.map((d) => el('li', { class: 'muted', text: d }))) : null;
      const limited = (c.limited || []).length ? el('ul', {}, ...c.limited.map((d) => el('li', { class: 'muted', text: d }))) : null;
      return el('div', { class: 'cmp' }, table, diffs, explained, limited, c.error ? el('p', { class: 'tone-error', text: c.error }) : null);
    }));
  }

  // ------------------------------------------------------------------ keys and events
  function openHelp(show) {
    const h = $('help');
    h.hidden = !show;
    if (show) { state.helpFrom = document.activeElement; $('help-close').focus(); } else if (state.helpFrom) state.helpFrom.focus();
  }
  document.addEventListener('keydown', (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    const typing = t && (t.tagName === 'INPUT' && t.type !== 'range' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA');
    if (!$('help').hidden) { if (e.key === 'Escape') { e.preventDefault(); openHelp(false); } return; }
    if (e.key === 'Escape') {
      if (typing && t.id === 'q' && t.value) { t.value = ''; applyFilter(); return; }
      if (state.view === 'run') { e.preventDefault(); location.hash = ''; }
      return;
    }
    if (typing) return;
    if (e.key === '?') { e.preventDefault(); openHelp(true); return; }
    if (state.view === 'runs') {
      if (e.key === '/') { e.preventDefault(); $('q').focus(); }
      return;
    }
    if (t && t.id === 'scrub') return; // the slider handles its own arrows
    const inTimeline = t && t.id === 'timeline';
    switch (e.key) {
      case 'ArrowRight': e.preventDefault(); timeline.move(timeline.cursor + 1); break;
      case 'ArrowLeft': e.preventDefault(); timeline.move(timeline.cursor - 1); break;
      case ']': e.preventDefault(); jumpProblem(1); break;
      case '[': e.preventDefault(); jumpProblem(-1); break;
      case 'n': e.preventDefault(); jumpToFinding(state.finding + 1); break;
      case 'N': e.preventDefault(); jumpToFinding(state.finding - 1); break;
      case 'x': e.preventDefault(); toggleRaw(); break;
      default:
        if (!inTimeline && ['ArrowDown', 'ArrowUp', 'PageDown', 'PageUp', 'Home', 'End'].includes(e.key) && t === document.body) {
          $('timeline').focus(); timeline.key(e);
        }
    }
  });
  $('scrub').addEventListener('input', (e) => timeline.move(Number(e.target.value), true));
  $('prev-problem').addEventListener('click', () => jumpProblem(-1));
  $('next-problem').addEventListener('click', () => jumpProblem(1));
  $('raw-btn').addEventListener('click', toggleRaw);
  $('help-btn').addEventListener('click', () => openHelp(true));
  $('help-close').addEventListener('click', () => openHelp(false));
  $('back').addEventListener('click', (e) => { e.preventDefault(); location.hash = ''; });
  let qTimer = null;
  $('q').addEventListener('input', () => { clearTimeout(qTimer); qTimer = setTimeout(() => applyFilter(), 200); });
  for (const id of ['f-code', 'f-sev', 'f-status']) $(id).addEventListener('change', () => applyFilter());
  const table = $('findings-table');
  if (table) {
    table.addEventListener('click', (e) => {
      if (e.target.closest('a')) return;
      const tr = e.target.closest('tr[data-i]');
      const a = tr && tr.querySelector('a.frame-link');
      if (a) location.hash = a.getAttribute('href');
    });
  }
  window.addEventListener('hashchange', () => { route().catch(fail); });
  function fail(err) {
    const p = el('p', { class: 'notice', role: 'alert', text: 'The report could not show this: ' + (err && err.message ? err.message : err) });
    document.body.prepend(p);
    throw err;
  }

  // ------------------------------------------------------------------ start
  fillCodes();
  applyFilter();
  route().then(() => {
    document.documentElement.dataset.ready = '1';
    window.__ckReadyAt = performance.now();
  }).catch(fail);
})();
