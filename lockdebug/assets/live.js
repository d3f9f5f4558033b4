// live.js refreshes the reqlock debug page every second from its JSON
// endpoint ("json", beside the page). It writes text only (textContent),
// never HTML, so that nothing in a lock name or a holder can run here.
(function () {
  "use strict";

  function fmtMS(v) { // as formatMS in snapshot.go
    var neg = v < 0 ? "-" : "";
    v = Math.abs(v);
    if (v < 1000) return neg + v + "ms";
    if (v < 60000) return neg + (Math.floor(v / 100) / 10).toFixed(1) + "s";
    var two = function (n) { return (n < 10 ? "0" : "") + n; };
    if (v < 3600000) return neg + Math.floor(v / 60000) + "m" + two(Math.floor(v % 60000 / 1000)) + "s";
    return neg + Math.floor(v / 3600000) + "h" + two(Math.floor(v % 3600000 / 60000)) + "m";
  }

  function mode(m, permits, slot, held) { // as modeText in snapshot.go
    if (m !== "permits") return m;
    return held ? "permit " + slot + " of " + permits : "permits (" + permits + ")";
  }

  function clock(iso) { // "15:04:05.000" of a UTC time
    var t = new Date(iso);
    var p = function (n, w) { n = String(n); while (n.length < w) n = "0" + n; return n; };
    return p(t.getUTCHours(), 2) + ":" + p(t.getUTCMinutes(), 2) + ":" + p(t.getUTCSeconds(), 2) + "." + p(t.getUTCMilliseconds(), 3);
  }

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function hidden(td) {
    td.appendChild(el("span", "hidden", "hidden"));
    return td;
  }

  function nameCell(name) {
    var td = el("td", null, "name");
    return name ? (td.textContent = name, td) : hidden(td);
  }

  function fill(id, list, cols, row) {
    var body = document.getElementById(id);
    if (!body) return;
    var rows = [];
    if (!list || list.length === 0) {
      var tr = el("tr", null, "empty"), td = el("td", "none");
      td.colSpan = cols;
      tr.appendChild(td);
      rows.push(tr);
    } else {
      list.forEach(function (x) { rows.push(row(x)); });
    }
    body.replaceChildren.apply(body, rows);
  }

  function text(id, s) {
    var e = document.getElementById(id);
    if (e) e.textContent = s;
  }

  function render(s) {
    text("now", clock(s.now) + " UTC");
    text("held-count", s.held.count);
    fill("held-rows", s.held.leases, 9, function (l) {
      var tr = el("tr");
      tr.appendChild(nameCell(l.name));
      var holder = el("td", null, "holder");
      if (l.holder) holder.textContent = l.holder.text;
      else if (l.token) holder.textContent = l.token;
      else hidden(holder);
      tr.appendChild(holder);
      tr.appendChild(el("td", l.route || ""));
      tr.appendChild(el("td", mode(l.mode, l.permits, l.slot, true) + (l.handed_over ? " (handed over)" : "")));
      tr.appendChild(el("td", fmtMS(l.held_ms), "num"));
      tr.appendChild(el("td", (l.valid_ms < 0 ? "expired " : "") + fmtMS(l.valid_ms), l.valid_ms < 0 ? "num bad" : "num"));
      tr.appendChild(el("td", fmtMS(l.ttl_ms), "num"));
      tr.appendChild(el("td", l.fence ? l.fence : "", "num"));
      tr.appendChild(el("td", fmtMS(l.waited_ms), "num"));
      return tr;
    });
    text("held-more", s.held.not_listed ? "and " + s.held.not_listed + " more, not listed (lockdebug.WithMaxLeases)" : "");

    text("waiting-count", s.waiting.count);
    fill("waiting-rows", s.waiting.waiters, 5, function (w) {
      var tr = el("tr");
      tr.appendChild(nameCell(w.name));
      tr.appendChild(el("td", w.route || ""));
      tr.appendChild(el("td", mode(w.mode, w.permits, 0, false)));
      tr.appendChild(el("td", clock(w.since)));
      tr.appendChild(el("td", fmtMS(w.waiting_ms), "num"));
      return tr;
    });
    text("waiting-more", s.waiting.not_listed ? "and " + s.waiting.not_listed + " more, not listed (lockdebug.WithMaxWaiters)" : "");

    var hot = document.getElementById("hot");
    if (hot) hot.hidden = !s.hot;
    if (s.hot) {
      text("hot-count", s.hot.names.length);
      text("hot-stats", "hits " + s.hot.hits + " · bypasses " + s.hot.bypasses + " · evictions " + s.hot.evictions +
        " · hand-offs " + s.hot.handoffs + " · kept " + s.hot.size);
      fill("hot-rows", s.hot.names, 5, function (h) {
        var tr = el("tr");
        tr.appendChild(nameCell(h.name));
        tr.appendChild(el("td", h.pinned ? "yes" : ""));
        tr.appendChild(el("td", h.holders, "num"));
        tr.appendChild(el("td", h.waiters, "num"));
        tr.appendChild(el("td", h.hot_ms ? fmtMS(h.hot_ms) : "", "num"));
        return tr;
      });
    }

    var w = s.waits;
    text("waits-window", "the last " + fmtMS(w.window_ms));
    text("waits-total", w.total);
    fill("waits-rows", w.buckets, 3 + w.outcomes.length, function (b) {
      var tr = el("tr");
      tr.appendChild(el("td", b.label));
      var bar = el("td", null, "bar"), m = el("meter");
      m.min = 0; m.max = 100; m.value = w.total > 0 ? Math.floor(b.total * 100 / w.total) : 0;
      bar.appendChild(m);
      tr.appendChild(bar);
      tr.appendChild(el("td", b.total, "num"));
      b.counts.forEach(function (n) { tr.appendChild(el("td", n ? n : "", "num")); });
      return tr;
    });
    var ends = Object.keys(w.releases).sort().map(function (k) { return k + " " + w.releases[k]; }).join(" ");
    text("waits-ends", "handed over " + w.handed_over + " · leases ended: " + ends);
  }

  function status(on, what) {
    var e = document.getElementById("live");
    if (!e) return;
    e.textContent = what;
    e.className = "live " + (on ? "on" : "off");
  }

  function poll() {
    fetch("json", { cache: "no-store", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (s) { render(s); status(true, "live"); },
        function (err) { status(false, "disconnected: " + err.message); })
      .then(function () { setTimeout(poll, 1000); });
  }

  poll();
})();
