/* simeval's run report: the rows table. The rows are JSON in #report-data (escaped by the
   writer: no text in them can end the element); every text goes in with textContent. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var rows = data.rows, refs = data.refs, bands = data.bands;
  // a row: [n, eval, case, score, pass, threshold, status, before, input, output,
  //         reference (index into refs, -1: none), found, missing, reason, note, where]
  var N = 0, EVAL = 1, CASE = 2, SCORE = 3, PASS = 4, STATUS = 6, BEFORE = 7,
    INPUT = 8, OUTPUT = 9, REF = 10, FOUND = 11, MISSING = 12, REASON = 13, NOTE = 14,
    WHERE = 15;
  var state = { query: "", view: "all", key: null, dir: 1, page: 0, size: 100 };
  var body = document.querySelector("#rows tbody");
  var info = document.getElementById("page-info");
  var prev = document.getElementById("prev-page");
  var next = document.getElementById("next-page");
  var search = document.getElementById("search");
  var view = document.getElementById("view");
  var size = document.getElementById("page-size");
  var haystacks = null;
  var shown = rows;

  function band(score) {
    for (var i = 0; i < bands.length; i++) {
      if (score >= bands[i][0]) return bands[i][1];
    }
    return bands[bands.length - 1][1];
  }

  function haystack(i) {
    if (haystacks === null) haystacks = new Array(rows.length);
    var h = haystacks[i];
    if (h === undefined) {
      var r = rows[i];
      h = [r[EVAL], r[CASE], r[WHERE], r[INPUT], r[OUTPUT], r[REF] >= 0 ? refs[r[REF]] : "",
        r[FOUND].join(" "), r[MISSING].join(" "), r[REASON], r[STATUS]].join("\n").toLowerCase();
      haystacks[i] = h;
    }
    return h;
  }

  var views = {
    all: function () { return true; },
    failed: function (r) { return !r[PASS]; },
    passed: function (r) { return !!r[PASS]; },
    regressed: function (r) { return r[STATUS] === "regressed"; },
    improved: function (r) { return r[STATUS] === "improved"; },
    "new": function (r) { return r[STATUS] === "new"; }
  };

  var keys = {
    n: function (r) { return r[N]; },
    score: function (r) { return r[SCORE]; },
    eval: function (r) { return r[EVAL] || ""; },
    "case": function (r) { return r[CASE].toLowerCase(); },
    change: function (r) { return r[BEFORE] === null ? 0 : r[SCORE] - r[BEFORE]; }
  };

  function select() {
    var q = state.query, keep = views[state.view] || views.all, out = [];
    for (var i = 0; i < rows.length; i++) {
      if (keep(rows[i]) && (!q || haystack(i).indexOf(q) >= 0)) out.push(i);
    }
    if (state.key) {
      var key = keys[state.key], dir = state.dir;
      out.sort(function (a, b) {
        var x = key(rows[a]), y = key(rows[b]);
        if (x < y) return -dir;
        if (x > y) return dir;
        return a - b;
      });
    }
    shown = out;
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function textCell(text) {
    var td = el("td");
    if (text !== null && text !== undefined && text !== "") td.appendChild(el("div", "text", text));
    return td;
  }

  function terms(cls, title, list) {
    var p = el("p", "terms " + cls);
    p.appendChild(el("span", "muted small", title + ": "));
    for (var i = 0; i < list.length; i++) p.appendChild(el("span", "t", list[i]));
    return p;
  }

  function rowElement(r) {
    var tr = el("tr", r[PASS] ? "passed" : "failed");
    tr.dataset.n = r[N];
    tr.appendChild(el("td", "num", String(r[N])));
    var score = el("td", "num score", r[SCORE].toFixed(3));
    score.appendChild(el("span", "where", band(r[SCORE])));
    tr.appendChild(score);
    var verdict = el("td");
    verdict.appendChild(el("span", r[PASS] ? "badge pass" : "badge fail", r[PASS] ? "pass" : "FAIL"));
    tr.appendChild(verdict);
    if (data.by_row) {
      var change = el("td", "num");
      if (r[STATUS]) change.appendChild(el("span", r[STATUS] === "regressed" ? "down" : r[STATUS] === "improved" ? "up" : "muted", r[STATUS]));
      if (r[BEFORE] !== null) change.appendChild(el("span", "where", r[BEFORE].toFixed(3) + " → " + r[SCORE].toFixed(3)));
      tr.appendChild(change);
    }
    if (data.evals) tr.appendChild(el("td", null, r[EVAL] || ""));
    var c = el("td", "case", r[CASE]);
    if (r[WHERE] !== r[CASE]) c.appendChild(el("span", "where", r[WHERE]));
    tr.appendChild(c);
    tr.appendChild(textCell(r[INPUT]));
    tr.appendChild(textCell(r[OUTPUT]));
    tr.appendChild(textCell(r[REF] >= 0 ? refs[r[REF]] : null));
    var why = el("td", "why");
    if (r[REASON]) why.appendChild(el("p", "reason", r[REASON]));
    if (!r[PASS] || r[MISSING].length) {
      if (r[FOUND].length) why.appendChild(terms("found", "found", r[FOUND]));
      if (r[MISSING].length) why.appendChild(terms("missing", "missing", r[MISSING]));
    }
    if (r[NOTE]) why.appendChild(el("p", "muted small", r[NOTE]));
    tr.appendChild(why);
    return tr;
  }

  function render() {
    var pages = Math.max(1, Math.ceil(shown.length / state.size));
    if (state.page >= pages) state.page = pages - 1;
    var start = state.page * state.size, end = Math.min(shown.length, start + state.size);
    var frag = document.createDocumentFragment();
    for (var i = start; i < end; i++) frag.appendChild(rowElement(rows[shown[i]]));
    body.textContent = "";
    body.appendChild(frag);
    info.textContent = shown.length
      ? "rows " + (start + 1).toLocaleString() + "–" + end.toLocaleString() + " of " +
        shown.length.toLocaleString() + " (page " + (state.page + 1) + " of " + pages + ")"
      : "no rows match";
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
  }

  function update() { select(); state.page = 0; render(); }

  var timer = null;
  search.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { state.query = search.value.trim().toLowerCase(); update(); }, 120);
  });
  view.addEventListener("change", function () { state.view = view.value; update(); });
  size.addEventListener("change", function () { state.size = parseInt(size.value, 10) || 100; state.page = 0; render(); });
  prev.addEventListener("click", function () { state.page -= 1; render(); });
  next.addEventListener("click", function () { state.page += 1; render(); });

  var heads = document.querySelectorAll("#rows th[data-sort]");
  Array.prototype.forEach.call(heads, function (th) {
    th.querySelector("button").addEventListener("click", function () {
      var key = th.dataset.sort;
      state.dir = state.key === key ? -state.dir : 1;
      state.key = key;
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
      update();
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll("[data-view]"), function (b) {
    b.addEventListener("click", function () {
      view.value = b.dataset.view; state.view = view.value; update();
      document.getElementById("rows-card").scrollIntoView();
    });
  });
  update();
})();
