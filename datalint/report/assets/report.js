/* datalint report: filter, sort and page the flagged-samples table in the browser.
   The rows come from the JSON island #dl-data; every value from the index is inserted
   with textContent, never as markup, so a hostile file name or message stays text. */
(function () {
  "use strict";
  var island = document.getElementById("dl-data");
  var table = document.getElementById("samples");
  if (!island || !table) { return; }
  var data = JSON.parse(island.textContent);
  var COL = { idx: 0, key: 1, status: 2, kinds: 3, q: 4, message: 5, details: 6, duration: 7, nbytes: 8, tb: 9 };
  var kinds = data.kinds;
  var rows = data.rows;
  var pageSize = data.page_size || 100;
  var state = { kinds: {}, onlyQuarantined: false, text: "", sort: "idx", dir: 1, page: 0 };
  kinds.forEach(function (kind) { state.kinds[kind] = true; });

  var tbody = table.tBodies[0];
  var controls = document.getElementById("table-controls");
  var pager = document.getElementById("pager");
  var status = document.getElementById("table-status");
  var search = document.getElementById("filter-text");
  var onlyQ = document.getElementById("filter-quarantined");
  var kindBoxes = Array.prototype.slice.call(document.querySelectorAll("#filter-kinds input[type=checkbox]"));

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function short(v) { return v < 1000 ? String(Number(v.toPrecision(3))) : Math.round(v).toLocaleString("en-US"); }
  function fmtSeconds(s) {
    if (s === null || s === undefined) { return ""; }
    if (s <= 0) { return "0 s"; }
    if (s >= 1) { return short(s) + " s"; }
    if (s >= 1e-3) { return short(s * 1e3) + " ms"; }
    if (s >= 1e-6) { return short(s * 1e6) + " \u00b5s"; }
    return short(s * 1e9) + " ns";
  }
  function fmtBytes(b) {
    if (b === null || b === undefined) { return ""; }
    var units = [["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024]];
    for (var i = 0; i < units.length; i++) {
      if (b >= units[i][1]) { return short(b / units[i][1]) + " " + units[i][0]; }
    }
    return short(b) + " B";
  }

  function matches(row) {
    if (state.onlyQuarantined && !row[COL.q]) { return false; }
    var anyKind = row[COL.kinds].some(function (k) { return state.kinds[kinds[k]]; });
    if (!anyKind) { return false; }
    if (state.text) {
      var hay = (String(row[COL.idx]) + " " + (row[COL.key] || "") + " " + (row[COL.message] || "")).toLowerCase();
      if (hay.indexOf(state.text) < 0) { return false; }
    }
    return true;
  }

  function sortValue(row) {
    switch (state.sort) {
      case "kinds": return row[COL.kinds].map(function (k) { return kinds[k]; }).join(" ");
      default: return row[COL[state.sort]];
    }
  }

  function compare(a, b) {
    var x = sortValue(a), y = sortValue(b);
    // blanks sort last in both directions: they are never what the reader is looking for
    if (x === null || x === undefined || x === "") { return (y === null || y === undefined || y === "") ? a[0] - b[0] : 1; }
    if (y === null || y === undefined || y === "") { return -1; }
    var c = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
    return c !== 0 ? c * state.dir : a[0] - b[0];
  }

  function kindChip(kindIndex, quarantineSet) {
    var name = kinds[kindIndex];
    var chip = el("button", quarantineSet[kindIndex] ? "kind q" : "kind", name);
    chip.type = "button";
    chip.title = "show only " + name;
    chip.setAttribute("data-kind", name);
    return chip;
  }

  function messageCell(row) {
    var td = el("td", "msg");
    var details = row[COL.details] || [];
    var tb = row[COL.tb];
    if (!details.length && (tb === null || tb === undefined)) {
      td.textContent = row[COL.message] || "";
      return td;
    }
    var box = el("details");
    box.appendChild(el("summary", null, row[COL.message] || "details"));
    details.forEach(function (line) { box.appendChild(el("div", "detail", line)); });
    if (tb !== null && tb !== undefined) { box.appendChild(el("pre", "traceback", data.tracebacks[tb])); }
    td.appendChild(box);
    return td;
  }

  var quarantineSet = {};
  data.quarantine_kinds.forEach(function (k) { quarantineSet[k] = true; });

  function renderRow(row) {
    var tr = el("tr", row[COL.q] ? "q" : "");
    tr.setAttribute("data-idx", row[COL.idx]);
    tr.appendChild(el("td", "num idx", row[COL.idx]));
    tr.appendChild(el("td", "key", row[COL.key]));
    tr.appendChild(el("td", "status", row[COL.status]));
    var kindsCell = el("td", "kinds");
    row[COL.kinds].forEach(function (k) { kindsCell.appendChild(kindChip(k, quarantineSet)); });
    tr.appendChild(kindsCell);
    tr.appendChild(el("td", "num", fmtSeconds(row[COL.duration])));
    tr.appendChild(el("td", "num", fmtBytes(row[COL.nbytes])));
    tr.appendChild(messageCell(row));
    return tr;
  }

  function render() {
    var visible = rows.filter(matches).sort(compare);
    var pages = Math.max(1, Math.ceil(visible.length / pageSize));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * pageSize;
    var fragment = document.createDocumentFragment();
    visible.slice(start, start + pageSize).forEach(function (row) { fragment.appendChild(renderRow(row)); });
    tbody.textContent = "";
    tbody.appendChild(fragment);
    status.textContent = visible.length
      ? "rows " + (start + 1).toLocaleString("en-US") + "\u2013" + Math.min(start + pageSize, visible.length).toLocaleString("en-US") +
        " of " + visible.length.toLocaleString("en-US") + " matching (" + rows.length.toLocaleString("en-US") + " in the table)"
      : "no sample matches these filters";
    status.setAttribute("data-matching", String(visible.length));
    pager.querySelector("[data-page=prev]").disabled = state.page === 0;
    pager.querySelector("[data-page=next]").disabled = state.page >= pages - 1;
    pager.querySelector(".page").textContent = "page " + (state.page + 1) + " of " + pages;
    Array.prototype.forEach.call(table.tHead.querySelectorAll("th[data-sort]"), function (th) {
      var key = th.getAttribute("data-sort");
      th.setAttribute("aria-sort", key === state.sort ? (state.dir > 0 ? "ascending" : "descending") : "none");
    });
  }

  function syncKindBoxes() {
    kindBoxes.forEach(function (box) { box.checked = !!state.kinds[box.value]; });
  }

  function showOnly(kind) {
    kinds.forEach(function (k) { state.kinds[k] = (k === kind); });
    syncKindBoxes();
    state.page = 0;
    render();
  }

  kindBoxes.forEach(function (box) {
    box.addEventListener("change", function () { state.kinds[box.value] = box.checked; state.page = 0; render(); });
  });
  document.getElementById("kinds-all").addEventListener("click", function () {
    kinds.forEach(function (k) { state.kinds[k] = true; }); syncKindBoxes(); state.page = 0; render();
  });
  document.getElementById("kinds-none").addEventListener("click", function () {
    kinds.forEach(function (k) { state.kinds[k] = false; }); syncKindBoxes(); state.page = 0; render();
  });
  onlyQ.addEventListener("change", function () { state.onlyQuarantined = onlyQ.checked; state.page = 0; render(); });
  search.addEventListener("input", function () { state.text = search.value.trim().toLowerCase(); state.page = 0; render(); });
  pager.addEventListener("click", function (event) {
    var which = event.target.getAttribute && event.target.getAttribute("data-page");
    if (which === "prev") { state.page -= 1; render(); }
    if (which === "next") { state.page += 1; render(); }
  });
  table.tHead.addEventListener("click", function (event) {
    var th = event.target.closest("th[data-sort]");
    if (!th) { return; }
    var key = th.getAttribute("data-sort");
    state.dir = (state.sort === key) ? -state.dir : 1;
    state.sort = key;
    state.page = 0;
    render();
  });
  tbody.addEventListener("click", function (event) {
    var chip = event.target.closest("button.kind[data-kind]");
    if (chip) { showOnly(chip.getAttribute("data-kind")); }
  });
  // a link such as report.html#kind=crash opens the table filtered to that kind
  var match = /(?:^#|&)kind=([^&]+)/.exec(window.location.hash);
  if (match && kinds.indexOf(decodeURIComponent(match[1])) >= 0) { showOnly(decodeURIComponent(match[1])); }

  controls.hidden = false;
  pager.hidden = false;
  render();
})();
