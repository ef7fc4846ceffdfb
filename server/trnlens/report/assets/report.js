// trnlens run report: zoom and pan of the timeline, event details, click-to-source, sortable op
// table. Plain DOM, no library; text goes in through textContent only (never as markup).
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('trnlens-data').textContent);
  const events = data.events || [];
  // In a VS Code webview the extension reveals file:line; in a browser the page shows it.
  const vscode = typeof acquireVsCodeApi === 'function' ? acquireVsCodeApi() : null;

  function reveal(path, line) {
    if (!path || !line) {
      return;
    }
    if (vscode) {
      vscode.postMessage({ type: 'reveal', path: path, line: Number(line) });
    }
  }

  // -- details
  const details = document.getElementById('details');
  function fmt(us) {
    if (us < 1) return (us * 1000).toFixed(0) + ' ns';
    if (us < 1000) return us.toPrecision(3) + ' µs';
    if (us < 1e6) return (us / 1000).toPrecision(3) + ' ms';
    return (us / 1e6).toPrecision(3) + ' s';
  }
  function row(table, key, value, cls) {
    const tr = document.createElement('tr');
    const th = document.createElement('th');
    const td = document.createElement('td');
    th.textContent = key;
    td.textContent = value;
    if (cls) td.className = cls;
    tr.append(th, td);
    table.append(tr);
  }
  function showDetails(ev) {
    if (!details) return;
    details.replaceChildren();
    const table = document.createElement('table');
    table.className = 'event';
    row(table, 'name', ev.name, 'name');
    row(table, 'duration', fmt(ev.dur_us), 'duration');
    row(table, 'starts at', fmt(ev.start_us) + ' into the step');
    row(table, 'lane', ev.lane + ' (' + ev.kind + ')');
    if (ev.variant) row(table, 'variant', ev.variant);
    if (ev.shapes) row(table, 'input shapes', JSON.stringify(ev.shapes), 'shapes');
    if (ev.path) {
      const hint = vscode ? '  (revealed in the editor)' : '';
      row(table, 'source', ev.path + ':' + ev.line + hint, 'where');
    }
    if (ev.note) row(table, 'note', ev.note);
    // a rank's collective call (report/ranks.py): what issued it, what it moved, what it exposed
    if (ev.issued_by) row(table, 'issued by', ev.issued_by);
    if (ev.bucket !== undefined) row(table, 'bucket', String(ev.bucket));
    if (ev.modules) row(table, 'modules', ev.modules.join(', '), 'modules');
    if (ev.bytes) row(table, 'bytes', (ev.bytes / 1e6).toPrecision(3) + ' MB');
    if (ev.exposed_us !== undefined) row(table, 'exposed', fmt(ev.exposed_us) + ' (no compute hid it)');
    details.append(table);
  }

  // -- timeline: zoom and pan redraw the bars from their start/duration (data-s, data-d)
  document.querySelectorAll('svg.timeline').forEach(function (svg) {
    const span = Number(svg.dataset.span) || 1;
    const labelW = Number(svg.dataset.labelW) || 190;
    const height = Number(svg.getAttribute('height'));
    const box = svg.parentElement;
    const view = { t0: 0, t1: span };
    const bars = Array.from(svg.querySelectorAll('g.ev'));
    const ticks = Array.from(svg.querySelectorAll('g.tick'));

    function draw() {
      const width = Math.max(box.clientWidth, 400);
      svg.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
      svg.setAttribute('width', String(width));
      svg.querySelectorAll('rect.lane-bg').forEach(function (r) { r.setAttribute('width', String(width)); });
      const scale = (width - labelW - 10) / (view.t1 - view.t0);
      bars.forEach(function (g) {
        const s = Number(g.dataset.s);
        const d = Number(g.dataset.d);
        const x = labelW + (s - view.t0) * scale;
        const w = Math.max(d * scale, 0.5);
        const rect = g.querySelector('rect');
        const text = g.querySelector('text');
        const visible = x + w >= labelW && x <= width;
        g.setAttribute('display', visible ? 'inline' : 'none');
        if (!visible) return;
        const cx = Math.max(x, labelW);
        const cw = Math.min(x + w, width) - cx;
        rect.setAttribute('x', cx.toFixed(2));
        rect.setAttribute('width', Math.max(cw, 0.5).toFixed(2));
        const name = events[Number(g.dataset.i)].name;
        text.setAttribute('x', (cx + 3).toFixed(2));
        text.textContent = cw > 6.5 * name.length ? name : '';
      });
      let lastLabel = -Infinity;
      ticks.forEach(function (tick, i) {
        const t = view.t0 + ((view.t1 - view.t0) * i) / (ticks.length - 1);
        const x = labelW + (t - view.t0) * scale;
        // Labels too close to the one before (a narrow panel) are left out.
        const crowded = x - lastLabel < 70 || (i < ticks.length - 1 && width - 10 - x < 70);
        tick.querySelector('text').setAttribute('display', crowded ? 'none' : 'inline');
        if (!crowded) lastLabel = x;
        const line = tick.querySelector('line');
        line.setAttribute('x1', x.toFixed(2));
        line.setAttribute('x2', x.toFixed(2));
        const text = tick.querySelector('text');
        const last = i === ticks.length - 1;
        text.setAttribute('x', (last ? x - 2 : x + 2).toFixed(2));
        text.textContent = fmt(t);
      });
    }
    function zoom(factor, at) {
      const width = Math.max(box.clientWidth, 400);
      const scale = (width - labelW - 10) / (view.t1 - view.t0);
      const center = at === undefined ? (view.t0 + view.t1) / 2 : view.t0 + (at - labelW) / scale;
      let t0 = center - (center - view.t0) / factor;
      let t1 = center + (view.t1 - center) / factor;
      if (t1 - t0 >= span) { t0 = 0; t1 = span; }
      view.t0 = Math.max(0, t0);
      view.t1 = Math.min(span, Math.max(t1, view.t0 + span / 1e5));
      draw();
    }
    svg.addEventListener('wheel', function (e) {
      e.preventDefault();
      const rect = svg.getBoundingClientRect();
      zoom(e.deltaY < 0 ? 1.25 : 0.8, e.clientX - rect.left);
    }, { passive: false });
    let drag = null;
    svg.addEventListener('mousedown', function (e) {
      drag = { x: e.clientX, t0: view.t0, t1: view.t1, moved: false };
    });
    window.addEventListener('mousemove', function (e) {
      if (!drag) return;
      const dx = e.clientX - drag.x;
      if (Math.abs(dx) > 3) { drag.moved = true; box.classList.add('dragging'); }
      if (!drag.moved) return;
      const width = Math.max(box.clientWidth, 400);
      const dt = (dx * (drag.t1 - drag.t0)) / (width - labelW - 10);
      const len = drag.t1 - drag.t0;
      view.t0 = Math.min(Math.max(0, drag.t0 - dt), span - len);
      view.t1 = view.t0 + len;
      draw();
    });
    window.addEventListener('mouseup', function () {
      box.classList.remove('dragging');
      setTimeout(function () { drag = null; }, 0);
    });
    svg.addEventListener('click', function (e) {
      const g = e.target.closest('g.ev');
      if (!g || (drag && drag.moved)) return;
      select(g);
    });
    svg.addEventListener('keydown', function (e) {
      const g = e.target.closest('g.ev');
      if (g && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); select(g); }
    });
    function select(g) {
      svg.querySelectorAll('g.ev.selected').forEach(function (s) { s.classList.remove('selected'); });
      g.classList.add('selected');
      const ev = events[Number(g.dataset.i)];
      showDetails(ev);
      reveal(ev.path, ev.line);
    }
    document.querySelectorAll('[data-zoom]').forEach(function (button) {
      button.addEventListener('click', function () {
        const how = button.dataset.zoom;
        if (how === 'reset') { view.t0 = 0; view.t1 = span; draw(); }
        else zoom(how === 'in' ? 1.5 : 1 / 1.5);
      });
    });
    window.addEventListener('resize', draw);
    draw();
  });

  // -- per-line rows: reveal the line (VS Code) or say where it is (browser)
  // (library lines too: the extension opens the library file, read-only to trnlens)
  document.querySelectorAll('table.lines tr.src, table.library-lines tr.src, table.keepers tr.src').forEach(function (tr) {
    tr.addEventListener('click', function () {
      document.querySelectorAll('tr.src.selected').forEach(function (s) { s.classList.remove('selected'); });
      tr.classList.add('selected');
      const where = tr.dataset.path + ':' + tr.dataset.line;
      let status = document.getElementById('where');
      if (!status) {
        status = document.createElement('p');
        status.id = 'where';
        tr.closest('section').append(status);
      }
      status.textContent = vscode ? 'revealed ' + where + ' in the editor' : where;
      reveal(tr.dataset.path, tr.dataset.line);
    });
  });

  // -- module tree blocks: open the module's class (its source file and line)
  document.querySelectorAll('svg.icicle .icicle-node[data-path]').forEach(function (node) {
    function open() {
      reveal(node.dataset.path, node.dataset.line);
    }
    node.addEventListener('click', open);
    node.addEventListener('keydown', function (e) {
      if (e.key === 'Enter') open();
    });
  });

  // -- sortable op tables
  document.querySelectorAll('table.sortable').forEach(function (table) {
    const heads = Array.from(table.querySelectorAll('th[data-sort]'));
    heads.forEach(function (th, column) {
      th.addEventListener('click', function () {
        const numeric = th.dataset.sort === 'num';
        const desc = !th.classList.contains('sorted-desc');
        heads.forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
        th.classList.add(desc ? 'sorted-desc' : 'sorted-asc');
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        rows.sort(function (a, b) {
          const x = a.cells[column].dataset.v;
          const y = b.cells[column].dataset.v;
          const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
          return desc ? -order : order;
        });
        rows.forEach(function (r) { body.append(r); });
      });
    });
  });

  // -- links to files next to the report: the extension opens them inside VS Code
  document.querySelectorAll('a.file').forEach(function (a) {
    a.addEventListener('click', function (e) {
      if (vscode) {
        e.preventDefault();
        vscode.postMessage({ type: 'open', href: a.getAttribute('href') });
      }
    });
  });
})();
