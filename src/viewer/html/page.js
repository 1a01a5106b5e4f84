/* blameprof report page (docs/html-report.md).
 *
 * Reads the data block (src/viewer/html/mod.rs: the top-down tree in preorder as parallel
 * arrays, interned names, threads, the lock table) and draws, on demand:
 *   - the top-down tree: inclusive values are the exclusive ones added up the tree;
 *   - the bottom-up tree and the flat list, as src/attribution/callers.rs builds them from
 *     call paths: every top-down node where a call path ends stands for those paths, and
 *     a function is charged at its innermost occurrence on each; a bottom-up node's callers
 *     are made when it is first expanded;
 *   - flame graphs of work, idleness and blame from the top-down tree;
 *   - the lock table and the threads.
 * Only the tree rows in view exist in the document (the list is virtual); all text goes in
 * with textContent. With "#selftest=<steps as URL-encoded JSON>" in its address the page
 * performs the steps as a user would (clicks, typing) and writes what it then shows, and
 * every error caught, into <pre id="selftest"> (tests/html_report.rs).
 */
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("blameprof-data").textContent);
  const metrics = data.metrics;
  const M = metrics.length;
  const names = data.functions;
  const NF = names.length;

  // ---------------------------------------------------------------- formatting helpers

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  /** As src/viewer/units.rs: nanoseconds as s/ms/us/ns with two decimals. */
  function fmtValue(v, unit) {
    if (unit !== "ns") return unit === "" ? String(v) : v + " " + unit;
    if (v >= 1e9) return (v / 1e9).toFixed(2) + " s";
    if (v >= 1e6) return (v / 1e6).toFixed(2) + " ms";
    if (v >= 1e3) return (v / 1e3).toFixed(2) + " us";
    return v + " ns";
  }

  function fmtMetric(v, m) {
    return fmtValue(v, metrics[m].unit);
  }

  function percent(v, base) {
    return base > 0 ? (v * 100) / base : 0;
  }

  function fmtPercent(p) {
    return p.toFixed(1) + "%";
  }

  function basename(path) {
    const i = path.lastIndexOf("/");
    return i < 0 ? path : path.slice(i + 1);
  }

  /** "[module]" after a name, as the text report writes it ("" for pseudo-modules). */
  function moduleLabel(f) {
    const module = data.modules[data.function_modules[f]];
    return module === "" || module[0] === "[" ? "" : "[" + basename(module) + "]";
  }

  function metricId(name) {
    return metrics.findIndex(function (d) { return d.name === name; });
  }

  // ---------------------------------------------------------------- the top-down tree

  const T = data.tree;
  const N = T.depth.length;
  const fnOf = new Int32Array(N);
  const inlOf = new Uint8Array(N);
  const parentOf = new Int32Array(N);
  const sizeOf = new Int32Array(N);
  const isEnd = new Uint8Array(N);
  /** Exclusive values, node-major (node i, metric m: i * M + m). */
  const excl = new Float64Array(N * M);
  /** Inclusive values per metric, added up on first use (see inclusiveOf). */
  const incl = new Array(M).fill(null);
  const tdRoots = [];
  (function decode() {
    const depth = T.depth;
    const functions = T.function;
    let path = new Int32Array(64);
    for (let i = 0; i < N; i++) {
      const d = depth[i];
      const f = functions[i];
      fnOf[i] = f >>> 1;
      inlOf[i] = f & 1;
      if (d >= path.length) {
        const longer = new Int32Array(2 * d);
        longer.set(path);
        path = longer;
      }
      path[d] = i;
      parentOf[i] = d > 0 ? path[d - 1] : -1;
      if (d === 0) tdRoots.push(i);
    }
    let k = 0;
    for (let j = 0; j < T.ends.length; j++) {
      k += T.ends[j];
      isEnd[k] = 1;
    }
    for (let m = 0; m < M; m++) {
      const pairs = T.exclusive[m];
      let at = 0;
      for (let j = 0; j < pairs.length; j += 2) {
        at += pairs[j];
        excl[at * M + m] = pairs[j + 1];
      }
    }
    for (let i = N - 1; i >= 0; i--) {
      sizeOf[i] += 1;
      if (parentOf[i] >= 0) sizeOf[parentOf[i]] += sizeOf[i];
    }
  })();

  /** Inclusive values of metric m: a node's exclusive value plus its children's inclusive
   *  ones (children come after their parent in preorder). */
  function inclusiveOf(m) {
    let values = incl[m];
    if (values === null) {
      values = new Float64Array(N);
      for (let i = 0; i < N; i++) values[i] = excl[i * M + m];
      for (let i = N - 1; i > 0; i--) if (parentOf[i] >= 0) values[parentOf[i]] += values[i];
      incl[m] = values;
    }
    return values;
  }

  function tdKids(i) {
    const kids = [];
    for (let j = i + 1; j < i + sizeOf[i]; j += sizeOf[j]) kids.push(j);
    return kids;
  }

  /** A tree for the views: handles are node indices (top-down) or BuNode objects. */
  const TD = {
    name: "top-down",
    roots: function () { return tdRoots; },
    kids: tdKids,
    hasKids: function (i) { return sizeOf[i] > 1; },
    fn: function (i) { return fnOf[i]; },
    inl: function (i) { return inlOf[i]; },
    val: function (i, m, inclusive) { return inclusive ? inclusiveOf(m)[i] : excl[i * M + m]; },
    place: function (i) { return data.places[T.place[i]]; },
  };

  // ---------------------------------------------------------------- bottom-up and flat

  /** A bottom-up node: the paths through it as (end node, node at this level, whether
   *  the root function's occurrence is the path's leaf) triples. */
  function BuNode(f, inl) {
    this.f = f;
    this.inl = inl;
    this.ends = [];
    this.at = [];
    this.leaf = [];
    this.incl = new Float64Array(M);
    this.excl = new Float64Array(M);
    this.kids = null;
  }

  BuNode.prototype.charge = function (end, at, leaf) {
    this.ends.push(end);
    this.at.push(at);
    this.leaf.push(leaf);
    const o = end * M;
    for (let m = 0; m < M; m++) {
      this.incl[m] += excl[o + m];
      if (leaf) this.excl[m] += excl[o + m];
    }
  };

  let buRoots = null;

  /** One root per function, charged at the function's innermost occurrence on each path. */
  function bottomUpRoots() {
    if (buRoots) return buRoots;
    buRoots = [];
    const byFn = new Array(NF);
    const seen = new Int32Array(NF).fill(-1);
    for (let end = 0; end < N; end++) {
      if (!isEnd[end]) continue;
      for (let p = end; p >= 0; p = parentOf[p]) {
        const f = fnOf[p];
        if (seen[f] === end) continue;
        seen[f] = end;
        let root = byFn[f];
        if (!root) {
          root = byFn[f] = new BuNode(f, inlOf[p]);
          buRoots.push(root);
        } else {
          root.inl &= inlOf[p];
        }
        root.charge(end, p, p === end ? 1 : 0);
      }
    }
    return buRoots;
  }

  /** The callers of a bottom-up node, made on first use. */
  function buKids(node) {
    if (node.kids) return node.kids;
    const byKey = new Map();
    const kids = [];
    for (let k = 0; k < node.at.length; k++) {
      const q = parentOf[node.at[k]];
      if (q < 0) continue;
      const key = fnOf[q] * 2 + inlOf[q];
      let kid = byKey.get(key);
      if (!kid) {
        kid = new BuNode(fnOf[q], inlOf[q]);
        byKey.set(key, kid);
        kids.push(kid);
      }
      kid.charge(node.ends[k], q, node.leaf[k]);
    }
    node.kids = kids;
    return kids;
  }

  const BU = {
    name: "bottom-up",
    roots: bottomUpRoots,
    kids: buKids,
    hasKids: function (node) {
      if (node.kids) return node.kids.length > 0;
      return node.at.some(function (p) { return parentOf[p] >= 0; });
    },
    fn: function (node) { return node.f; },
    inl: function (node) { return node.inl; },
    val: function (node, m, inclusive) { return (inclusive ? node.incl : node.excl)[m]; },
    place: function (node) { return moduleLabel(node.f); },
  };

  const FLAT = {
    name: "flat",
    roots: bottomUpRoots,
    kids: function () { return []; },
    hasKids: function () { return false; },
    fn: BU.fn,
    inl: BU.inl,
    val: BU.val,
    place: BU.place,
  };

  // ---------------------------------------------------------------- shared state

  const state = {
    tab: null,
    percentOf: "total",
    costs: "both",
    /** Per metric: whether its columns are shown (the recorded metrics and --metric). */
    shown: metrics.map(function (d, m) { return d.base === null || m === data.metric; }),
    query: "",
    /** Per function: whether its name matches the search (null: no search). */
    matchFn: null,
  };

  function percentBase(m) {
    return state.percentOf === "effort" && data.effort !== null ? data.effort : data.totals[m];
  }

  function columns() {
    const cols = [];
    for (let m = 0; m < M; m++) {
      if (!state.shown[m]) continue;
      if (state.costs !== "excl") cols.push({ m: m, incl: true });
      if (state.costs !== "incl") cols.push({ m: m, incl: false });
    }
    return cols;
  }

  function colKey(m, inclusive) {
    return metrics[m].name + (inclusive ? "/incl" : "/excl");
  }

  function matches(f) {
    return state.matchFn !== null && state.matchFn[f] === 1;
  }

  // ---------------------------------------------------------------- tree views

  /** One tree view: its expanded nodes, sort, sorted children, rows and selection. */
  function TreeView(model, sortInclusive, hasHotPath) {
    this.model = model;
    this.sort = { m: data.metric, incl: sortInclusive };
    this.hasHotPath = hasHotPath;
    this.expanded = new Set();
    this.sorted = new Map();
    this.hot = new Set();
    this.rows = { h: [], d: [] };
    this.selected = -1;
    this.scrollTop = 0;
    this.opened = false;
    this.query = "";
  }

  TreeView.prototype.compare = function () {
    const model = this.model;
    const m = this.sort.m;
    const inclusive = this.sort.incl;
    // As Tree::sort: by the cost, then by the other cost of the metric, then by name.
    return function (a, b) {
      const d = model.val(b, m, inclusive) - model.val(a, m, inclusive);
      if (d !== 0) return d;
      const other = model.val(b, m, !inclusive) - model.val(a, m, !inclusive);
      if (other !== 0) return other;
      const na = names[model.fn(a)];
      const nb = names[model.fn(b)];
      if (na !== nb) return na < nb ? -1 : 1;
      return model.inl(a) - model.inl(b);
    };
  };

  /** The roots (h === null) or the children of h, in sort order. */
  TreeView.prototype.sortedKids = function (h) {
    let list = this.sorted.get(h);
    if (!list) {
      list = (h === null ? this.model.roots() : this.model.kids(h)).slice();
      list.sort(this.compare());
      this.sorted.set(h, list);
    }
    return list;
  };

  /** As Tree::hot_path: from the first root while it holds at least half of the total,
   *  then down the first child while it holds at least half of its parent (inclusive). */
  TreeView.prototype.hotPath = function () {
    const path = [];
    if (!this.hasHotPath) return path;
    const m = this.sort.m;
    let parent = data.totals[m];
    let candidates = this.sortedKids(null);
    while (candidates.length > 0) {
      const first = candidates[0];
      const cost = this.model.val(first, m, true);
      if (cost === 0 || cost * 2 < parent) break;
      path.push(first);
      parent = cost;
      candidates = this.sortedKids(first);
    }
    return path;
  };

  TreeView.prototype.setSort = function (m, inclusive) {
    this.sort = { m: m, incl: inclusive };
    this.sorted = new Map();
    this.hot = new Set(this.hotPath());
    this.buildRows();
  };

  TreeView.prototype.buildRows = function () {
    const hs = [];
    const ds = [];
    const stack = [];
    const roots = this.sortedKids(null);
    for (let i = roots.length - 1; i >= 0; i--) stack.push(roots[i], 0);
    while (stack.length > 0) {
      const d = stack.pop();
      const h = stack.pop();
      hs.push(h);
      ds.push(d);
      if (this.expanded.has(h)) {
        const kids = this.sortedKids(h);
        for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i], d + 1);
      }
    }
    const selected = this.selected >= 0 ? this.rows.h[this.selected] : undefined;
    this.rows = { h: hs, d: ds };
    this.selected = selected === undefined ? -1 : hs.indexOf(selected);
  };

  TreeView.prototype.expandHotPath = function () {
    this.expanded = new Set();
    const path = this.hotPath();
    this.hot = new Set(path);
    for (const h of path) this.expanded.add(h);
    this.buildRows();
    return path.length > 0 ? this.rows.h.indexOf(path[path.length - 1]) : -1;
  };

  /** Expands the paths to the nodes of matching functions (top-down: every node); returns
   *  how many nodes match. */
  TreeView.prototype.applySearch = function () {
    this.query = state.query;
    let count = 0;
    if (state.matchFn === null) return count;
    if (this.model === TD) {
      const marked = new Uint8Array(N);
      for (let i = 0; i < N; i++) {
        if (state.matchFn[fnOf[i]] !== 1) continue;
        count++;
        for (let p = parentOf[i]; p >= 0 && !marked[p]; p = parentOf[p]) {
          marked[p] = 1;
          this.expanded.add(p);
        }
      }
    } else {
      for (const r of this.model.roots()) if (state.matchFn[r.f] === 1) count++;
    }
    this.buildRows();
    return count;
  };

  const views = {
    "top-down": new TreeView(TD, true, true),
    // As the text report (src/viewer/mod.rs, sort_order): callers views by exclusive cost.
    "bottom-up": new TreeView(BU, false, true),
    flat: new TreeView(FLAT, false, false),
  };

  const ROW = 20;
  const treePane = document.getElementById("tree-pane");
  const treeHead = document.getElementById("tree-head");
  const scroller = document.getElementById("tree-rows");
  const spacer = document.getElementById("tree-spacer");
  const win = document.getElementById("tree-window");
  const foot = document.getElementById("tree-foot");

  function currentView() {
    return views[state.tab] || null;
  }

  function renderHead(vs) {
    treeHead.textContent = "";
    // Wide enough for every column: narrower windows scroll sideways, head and rows together.
    const width = 320 + columns().length * 132 + "px";
    treeHead.style.minWidth = width;
    spacer.style.minWidth = width;
    const name = el("div", "fn", vs.model === TD ? "function (calling context)" :
      vs.model === BU ? "function, callers below" : "function");
    treeHead.appendChild(name);
    for (const c of columns()) {
      const cell = el("div", "c");
      cell.dataset.col = colKey(c.m, c.incl);
      const sorted = vs.sort.m === c.m && vs.sort.incl === c.incl;
      if (sorted) cell.classList.add("sorted");
      cell.appendChild(document.createTextNode(metrics[c.m].name + (sorted ? " \u25BC" : "")));
      cell.appendChild(el("span", "sub", c.incl ? "inclusive" : "exclusive"));
      cell.title = metrics[c.m].description + "; click to sort by it";
      treeHead.appendChild(cell);
    }
  }

  function rowElement(vs, i) {
    const h = vs.rows.h[i];
    const d = vs.rows.d[i];
    const model = vs.model;
    const f = model.fn(h);
    const row = el("div", "row");
    row.dataset.i = i;
    row.dataset.depth = d;
    row.style.top = i * ROW + "px";
    if (i % 2 === 1) row.classList.add("odd");
    if (vs.hot.has(h)) row.classList.add("hot");
    if (matches(f)) row.classList.add("match");
    if (i === vs.selected) row.classList.add("selected");
    const name = el("div", "fn");
    name.style.paddingLeft = 2 + d * 14 + "px";
    const tog = el("span", "tog");
    if (model.hasKids(h)) {
      const open = vs.expanded.has(h);
      tog.textContent = open ? "\u25BE" : "\u25B8";
      tog.setAttribute("role", "button");
      tog.setAttribute("aria-expanded", String(open));
      tog.title = open ? "collapse" : "expand";
    }
    name.appendChild(tog);
    name.appendChild(el("span", "mark", vs.hot.has(h) ? "*" : ""));
    name.appendChild(el("span", "name", names[f]));
    if (model.inl(h)) name.appendChild(el("span", "tag", "inlined"));
    const place = model.place(h);
    if (place) name.appendChild(el("span", "loc", place));
    name.title = names[f] + "\n" + (data.modules[data.function_modules[f]] || "(no module)");
    row.appendChild(name);
    for (const c of columns()) {
      const v = model.val(h, c.m, c.incl);
      const cell = el("div", "c");
      cell.dataset.col = colKey(c.m, c.incl);
      cell.appendChild(el("span", "v", fmtMetric(v, c.m)));
      cell.appendChild(el("span", "p", fmtPercent(percent(v, percentBase(c.m)))));
      row.appendChild(cell);
    }
    return row;
  }

  function renderWindow() {
    const vs = currentView();
    if (!vs) return;
    const n = vs.rows.h.length;
    spacer.style.height = Math.max(n * ROW, 1) + "px";
    const top = Math.max(0, scroller.scrollTop - treeHead.offsetHeight);
    const height = scroller.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW) - 10);
    const last = Math.min(n, Math.ceil((top + height) / ROW) + 10);
    const frag = document.createDocumentFragment();
    for (let i = first; i < last; i++) frag.appendChild(rowElement(vs, i));
    win.textContent = "";
    win.appendChild(frag);
    if (n === 0) win.appendChild(el("div", "status", "No samples in this profile."));
  }

  function renderFoot(vs) {
    foot.textContent = "";
    const h = vs.selected >= 0 ? vs.rows.h[vs.selected] : undefined;
    if (h === undefined) {
      const sort = metrics[vs.sort.m].name + (vs.sort.incl ? " inclusive" : " exclusive");
      foot.textContent = vs.rows.h.length + " rows shown; sorted by " + sort +
        (vs.hasHotPath ? "; * marks the hot path" : "") +
        ". Click a row for all its metrics; \u25B8 expands it.";
      return;
    }
    const model = vs.model;
    const f = model.fn(h);
    foot.appendChild(el("strong", null, names[f]));
    const module = data.modules[data.function_modules[f]];
    foot.appendChild(el("span", "loc", [model.place(h), module].filter(Boolean).join("  ")));
    const parts = [];
    for (let m = 0; m < M; m++) {
      const i = model.val(h, m, true);
      const e = model.val(h, m, false);
      if (i === 0 && e === 0) continue;
      parts.push(metrics[m].name + " " + fmtMetric(i, m) + " incl (" +
        fmtPercent(percent(i, percentBase(m))) + "), " + fmtMetric(e, m) + " excl");
    }
    foot.appendChild(el("div", null, parts.length ? parts.join("; ") : "no cost in any metric"));
  }

  function renderTree(vs) {
    renderHead(vs);
    renderWindow();
    renderFoot(vs);
  }

  /** Scrolls row i into view (below the sticky head) unless it is in view. */
  function scrollToRow(i) {
    const head = treeHead.offsetHeight;
    const y = head + i * ROW;
    const height = scroller.clientHeight || 600;
    if (y < scroller.scrollTop + head || y + ROW > scroller.scrollTop + height) {
      scroller.scrollTop = Math.max(0, y - head - Math.floor((height - head) / 3));
    }
    renderWindow();
  }

  function toggle(vs, i) {
    const h = vs.rows.h[i];
    if (!vs.model.hasKids(h)) return;
    if (vs.expanded.has(h)) vs.expanded.delete(h);
    else vs.expanded.add(h);
    vs.selected = i;
    vs.buildRows();
    renderTree(vs);
  }

  function select(vs, i) {
    vs.selected = i;
    scrollToRow(i);
    renderFoot(vs);
  }

  win.addEventListener("click", function (e) {
    const vs = currentView();
    const row = e.target.closest(".row");
    if (!vs || !row) return;
    const i = Number(row.dataset.i);
    if (e.target.closest(".tog")) toggle(vs, i);
    else select(vs, i);
  });

  win.addEventListener("dblclick", function (e) {
    const vs = currentView();
    const row = e.target.closest(".row");
    if (vs && row && !e.target.closest(".tog")) toggle(vs, Number(row.dataset.i));
  });

  scroller.addEventListener("scroll", renderWindow);

  scroller.addEventListener("keydown", function (e) {
    const vs = currentView();
    if (!vs || vs.rows.h.length === 0) return;
    const i = Math.max(vs.selected, 0);
    const h = vs.rows.h[i];
    if (e.key === "ArrowDown") select(vs, Math.min(i + 1, vs.rows.h.length - 1));
    else if (e.key === "ArrowUp") select(vs, Math.max(i - 1, 0));
    else if (e.key === "ArrowRight" && !vs.expanded.has(h)) toggle(vs, i);
    else if (e.key === "ArrowLeft" && vs.expanded.has(h)) toggle(vs, i);
    else if (e.key === "ArrowLeft") {
      let p = i - 1;
      while (p >= 0 && vs.rows.d[p] >= vs.rows.d[i]) p--;
      if (p >= 0) select(vs, p);
    } else if (e.key === "Enter") toggle(vs, i);
    else return;
    e.preventDefault();
  });

  treeHead.addEventListener("click", function (e) {
    const vs = currentView();
    const cell = e.target.closest(".c");
    if (!vs || !cell) return;
    const col = cell.dataset.col;
    const slash = col.lastIndexOf("/");
    vs.setSort(metricId(col.slice(0, slash)), col.slice(slash + 1) === "incl");
    renderTree(vs);
  });

  document.getElementById("hot").addEventListener("click", function () {
    const vs = currentView();
    if (!vs) return;
    const last = vs.expandHotPath();
    vs.selected = last;
    scroller.scrollTop = 0;
    renderTree(vs);
    if (last >= 0) scrollToRow(last);
  });

  document.getElementById("collapse").addEventListener("click", function () {
    const vs = currentView();
    if (!vs) return;
    vs.expanded = new Set();
    vs.selected = -1;
    vs.buildRows();
    scroller.scrollTop = 0;
    renderTree(vs);
  });

  // ---------------------------------------------------------------- search

  const searchBox = document.getElementById("search");
  const searchStatus = document.getElementById("search-status");
  let lowerNames = null;
  let searchTimer = 0;

  function runSearch() {
    clearTimeout(searchTimer);
    const q = searchBox.value.trim().toLowerCase();
    state.query = q;
    if (q === "") {
      state.matchFn = null;
    } else {
      if (!lowerNames) lowerNames = names.map(function (s) { return s.toLowerCase(); });
      state.matchFn = new Uint8Array(NF);
      for (let f = 0; f < NF; f++) if (lowerNames[f].indexOf(q) >= 0) state.matchFn[f] = 1;
    }
    showSearch();
    if (state.tab === "flame") for (const fg of flames) fg.draw();
  }

  /** Applies the search to the current tree view, says what it found and shows the first. */
  function showSearch() {
    const vs = currentView();
    if (!vs) {
      searchStatus.textContent = state.matchFn ? countFunctions() + " functions match" : "";
      return;
    }
    const count = vs.applySearch();
    if (state.matchFn === null) {
      searchStatus.textContent = "";
      renderTree(vs);
      return;
    }
    const what = vs.model === TD ? " nodes" : " functions";
    searchStatus.textContent = count + what + " match" +
      (vs.model === TD ? " (" + countFunctions() + " functions)" : "");
    renderTree(vs);
    const first = nextMatch(vs, -1, 1);
    if (first >= 0) select(vs, first);
  }

  function countFunctions() {
    let n = 0;
    for (let f = 0; f < NF; f++) n += state.matchFn[f];
    return n;
  }

  function nextMatch(vs, from, step) {
    const n = vs.rows.h.length;
    for (let k = 1; k <= n; k++) {
      const i = (((from + step * k) % n) + n) % n;
      if (matches(vs.model.fn(vs.rows.h[i]))) return i;
    }
    return -1;
  }

  function jumpMatch(step) {
    const vs = currentView();
    if (!vs || state.matchFn === null) return;
    const i = nextMatch(vs, vs.selected, step);
    if (i >= 0) select(vs, i);
    renderWindow();
  }

  searchBox.addEventListener("input", function () {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(runSearch, 250);
  });

  searchBox.addEventListener("keydown", function (e) {
    if (e.key !== "Enter") return;
    e.preventDefault();
    if (searchBox.value.trim().toLowerCase() === state.query && state.matchFn !== null) {
      jumpMatch(e.shiftKey ? -1 : 1);
    } else {
      runSearch();
    }
  });

  document.getElementById("search-next").addEventListener("click", function () { jumpMatch(1); });
  document.getElementById("search-prev").addEventListener("click", function () { jumpMatch(-1); });

  // ---------------------------------------------------------------- options

  for (const radio of document.querySelectorAll("input[name=percent]")) {
    if (radio.value === "effort" && data.effort === null) {
      radio.disabled = true;
      radio.parentElement.title = "this profile lacks the work or idleness metric";
    }
    radio.addEventListener("change", function () {
      if (!radio.checked) return;
      state.percentOf = radio.value;
      refresh();
    });
  }

  document.getElementById("costs").addEventListener("change", function (e) {
    state.costs = e.target.value;
    refresh();
  });

  (function metricChoice() {
    const box = document.getElementById("metric-choice");
    metrics.forEach(function (d, m) {
      const label = el("label");
      const check = el("input");
      check.type = "checkbox";
      check.checked = state.shown[m];
      check.dataset.metric = d.name;
      check.addEventListener("change", function () {
        state.shown[m] = check.checked;
        refresh();
      });
      label.appendChild(check);
      label.appendChild(document.createTextNode(" " + d.name + " (" + fmtMetric(data.totals[m], m) + ")"));
      label.title = d.description;
      box.appendChild(label);
    });
  })();

  /** Redraws the current tab after an option changed. */
  function refresh() {
    const vs = currentView();
    if (vs) renderTree(vs);
    if (state.tab === "threads") buildThreads();
  }

  // ---------------------------------------------------------------- flame graphs

  const FH = 17;
  const flamePane = document.getElementById("flame-pane");
  const tip = document.getElementById("tip");
  const flames = [];
  const byName = new Map();

  /** Children of node p (roots for -1) by name, as inferno orders frames. */
  function kidsByName(p) {
    let list = byName.get(p);
    if (!list) {
      list = (p < 0 ? tdRoots : tdKids(p)).slice();
      list.sort(function (a, b) {
        const na = names[fnOf[a]];
        const nb = names[fnOf[b]];
        if (na !== nb) return na < nb ? -1 : 1;
        return inlOf[a] - inlOf[b];
      });
      byName.set(p, list);
    }
    return list;
  }

  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
    return (h >>> 0) / 4294967296;
  }

  const palettes = {
    work: function (v, w) { return "rgb(" + (205 + 50 * v | 0) + "," + (230 * w | 0) + "," + (55 * v | 0) + ")"; },
    idleness: function (v, w) { return "rgb(" + (80 + 60 * v | 0) + "," + (120 + 60 * w | 0) + "," + (200 + 55 * v | 0) + ")"; },
    blame: function (v, w) { return "rgb(" + (200 + 55 * v | 0) + "," + (60 + 90 * w | 0) + "," + (80 + 60 * v | 0) + ")"; },
  };

  function FlameGraph(m) {
    this.m = m;
    this.zoom = -1;
    this.palette = palettes[metrics[m].name];
    const fg = this;
    this.root = el("section", "flame");
    this.root.dataset.metric = metrics[m].name;
    const head = el("div", "flame-head");
    head.appendChild(el("h2", null, metrics[m].name));
    head.appendChild(el("span", "status", metrics[m].description + "; total " +
      fmtMetric(data.totals[m], m) + ". Click a frame to zoom, the bottom one to zoom out."));
    const reset = el("button", "reset", "Reset zoom");
    reset.type = "button";
    reset.addEventListener("click", function () { fg.zoomTo(-1); });
    head.appendChild(reset);
    this.box = el("div", "flame-box");
    this.info = el("div", "flame-info status");
    this.root.appendChild(head);
    this.root.appendChild(this.box);
    this.root.appendChild(this.info);
    this.box.addEventListener("mouseover", function (e) { fg.hover(e); });
    this.box.addEventListener("mousemove", function (e) { fg.hover(e); });
    this.box.addEventListener("mouseleave", function () { tip.hidden = true; });
    this.box.addEventListener("click", function (e) {
      const fr = e.target.closest(".fr");
      if (fr) fg.zoomTo(Number(fr.dataset.node));
    });
  }

  FlameGraph.prototype.describe = function (node) {
    const m = this.m;
    if (node < 0) return "all\n" + fmtMetric(data.totals[m], m) + " (100.0% of " + metrics[m].name + ")";
    const v = inclusiveOf(m)[node];
    const lines = [names[fnOf[node]] + (inlOf[node] ? " (inlined)" : ""),
      fmtMetric(v, m) + " (" + fmtPercent(percent(v, data.totals[m])) + " of " + metrics[m].name + ")"];
    const place = TD.place(node) || moduleLabel(fnOf[node]);
    if (place) lines.push(place);
    return lines.join("\n");
  };

  FlameGraph.prototype.hover = function (e) {
    const fr = e.target.closest(".fr");
    if (!fr) {
      tip.hidden = true;
      return;
    }
    const text = this.describe(Number(fr.dataset.node));
    tip.textContent = text;
    tip.hidden = false;
    const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4);
    tip.style.left = Math.max(0, x) + "px";
    tip.style.top = e.clientY + 16 + "px";
    this.info.textContent = text.split("\n").join("  \u2014  ");
  };

  FlameGraph.prototype.zoomTo = function (node) {
    this.zoom = node;
    this.draw();
    this.info.textContent = node < 0 ? "" : "zoomed to " + names[fnOf[node]];
  };

  FlameGraph.prototype.draw = function () {
    const m = this.m;
    const box = this.box;
    box.textContent = "";
    const total = data.totals[m];
    if (total === 0) {
      box.style.height = "";
      box.appendChild(el("div", "status", "No " + metrics[m].name + " in this profile."));
      return;
    }
    const W = Math.max(box.clientWidth, 300);
    const chain = [];
    for (let p = this.zoom; p >= 0; p = parentOf[p]) chain.push(p);
    chain.reverse();
    const frames = [[-1, 0, 0, W]];
    chain.forEach(function (p, k) { frames.push([p, k + 1, 0, W]); });
    const values = inclusiveOf(m);
    const span = this.zoom < 0 ? total : values[this.zoom];
    const scale = span > 0 ? W / span : 0;
    const stack = [[this.zoom, 0, chain.length + 1]];
    let depth = chain.length;
    while (stack.length > 0) {
      const top = stack.pop();
      let x = top[1];
      for (const c of kidsByName(top[0])) {
        const w = values[c] * scale;
        if (w >= 1) {
          frames.push([c, top[2], x, w]);
          stack.push([c, x, top[2] + 1]);
          if (top[2] > depth) depth = top[2];
        }
        x += w;
      }
    }
    box.style.height = (depth + 1) * FH + "px";
    const frag = document.createDocumentFragment();
    for (const f of frames) {
      const node = f[0];
      const name = node < 0 ? "all" : names[fnOf[node]];
      const div = el("div", "fr", name);
      div.dataset.node = node;
      div.style.left = f[2] + "px";
      div.style.width = f[3] + "px";
      div.style.top = (depth - f[1]) * FH + "px";
      div.style.background = this.palette ? this.palette(hash(name), hash(name + "#")) : "#9c9";
      if (node >= 0 && matches(fnOf[node])) div.classList.add("match");
      frag.appendChild(div);
    }
    box.appendChild(frag);
  };

  function buildFlames() {
    if (flames.length > 0) return;
    flamePane.appendChild(el("p", "note", "Flame graphs of the calling-context tree: a frame's " +
      "width is its inclusive cost, its callees stand on it, siblings are in name order. " +
      "Frames narrower than a pixel are not drawn (zoom in to see them). The search " +
      "colours matching frames."));
    for (const name of ["work", "idleness", "blame"]) {
      const m = metricId(name);
      if (m < 0) continue;
      const fg = new FlameGraph(m);
      flames.push(fg);
      flamePane.appendChild(fg.root);
    }
    if (flames.length === 0) flamePane.appendChild(el("p", "status", "This profile has none of the metrics work, idleness and blame."));
  }

  let resizeTimer = 0;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      if (state.tab === "flame") for (const fg of flames) fg.draw();
      renderWindow();
    }, 150);
  });

  // ---------------------------------------------------------------- tables

  /** A table of `rows` with sortable columns {title, text(row), key(row), left}. */
  function sortableTable(cols, rows, onRow) {
    const table = el("table", "grid");
    const thead = el("thead");
    const hr = el("tr");
    const tbody = el("tbody");
    let order = rows.slice();
    function fill() {
      tbody.textContent = "";
      for (const r of order) {
        const tr = el("tr");
        for (const c of cols) {
          const td = el("td", c.left ? "text" : null, c.text(r));
          if (c.title) td.dataset.col = c.title;
          tr.appendChild(td);
        }
        tbody.appendChild(tr);
        if (onRow) onRow(tr, r);
      }
    }
    cols.forEach(function (c) {
      const th = el("th", null, c.title);
      if (c.help) th.title = c.help;
      th.addEventListener("click", function () {
        order = rows.slice().sort(function (a, b) {
          const ka = c.key(a);
          const kb = c.key(b);
          if (typeof ka === "string") return ka < kb ? -1 : ka > kb ? 1 : 0;
          return (kb === null ? -1 : kb) - (ka === null ? -1 : ka);
        });
        fill();
      });
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    table.appendChild(thead);
    table.appendChild(tbody);
    fill();
    return table;
  }

  function siteLabel(s) {
    return s.lock_function === "" ? s.caller : s.caller + " -> " + s.lock_function;
  }

  function ns(v) {
    return fmtValue(v, "ns");
  }

  function optPercent(v) {
    return v === null || v === undefined ? "-" : fmtPercent(v * 100);
  }

  function namesHolder(kind) {
    return kind === "mutex" || kind === "rwlock";
  }

  /** The lock view's columns, as src/viewer/locks.rs writes them. */
  function lockColumns(nameOf) {
    const c = function (r) { return r.counts; };
    return [
      { title: "lock", left: true, text: nameOf, key: nameOf },
      { title: "kind", left: true, text: function (r) { return r.kind || "?"; }, key: function (r) { return r.kind || "?"; } },
      { title: "acquired~", help: "acquisitions, sampled and scaled",
        text: function (r) { return c(r).acquisition_samples > 0 ? String(c(r).acquisitions) : "-"; },
        key: function (r) { return c(r).acquisitions; } },
      { title: "contended", text: function (r) { return String(c(r).contended); }, key: function (r) { return c(r).contended; } },
      { title: "rate", text: function (r) { return optPercent(c(r).contention_rate); }, key: function (r) { return c(r).contention_rate; } },
      { title: "try failed", text: function (r) { return c(r).try_failed > 0 ? c(r).try_failed + "/" + c(r).try_attempts : "0"; },
        key: function (r) { return c(r).try_failed; } },
      { title: "wait", text: function (r) { return ns(c(r).wait_ns); }, key: function (r) { return c(r).wait_ns; } },
      { title: "avg wait", text: function (r) { return ns(c(r).contended > 0 ? Math.floor(c(r).wait_ns / c(r).contended) : 0); },
        key: function (r) { return c(r).contended > 0 ? c(r).wait_ns / c(r).contended : 0; } },
      { title: "max wait", text: function (r) { return ns(c(r).max_wait_ns); }, key: function (r) { return c(r).max_wait_ns; } },
      { title: "peak", help: "most waiters at once", text: function (r) { return String(c(r).peak_waiters); }, key: function (r) { return c(r).peak_waiters; } },
      { title: "avg hold", help: "average length of the holds others waited for",
        text: function (r) { return c(r).contended_hold_avg_ns === null ? "-" : ns(c(r).contended_hold_avg_ns); },
        key: function (r) { return c(r).contended_hold_avg_ns; } },
      { title: "press.", help: "critical section pressure: waiting over the threads' running time",
        text: function (r) { return optPercent(r.counts.pressure); }, key: function (r) { return r.counts.pressure; } },
      { title: "blame", text: function (r) { return ns(c(r).blame_ns); }, key: function (r) { return c(r).blame_ns; } },
      { title: "held~", help: "the holders' CPU time while others waited (held.contended)",
        text: function (r) { return namesHolder(r.kind) ? ns(c(r).held_ns) : "-"; }, key: function (r) { return c(r).held_ns; } },
    ];
  }

  function lockDetails(lock) {
    const box = el("div", "details");
    const waited = function (caller) {
      const w = lock.waiters.find(function (s) { return s.caller === caller; });
      return w ? w.ns : 0;
    };
    box.appendChild(el("div", "status", lock.kind + " at " + lock.address + " in process " + lock.pid +
      ", named by " + lock.naming + (lock.group ? "; group " + lock.group : "") +
      (lock.instances > 1 ? "; " + lock.instances + " locks lived at this address" : "")));
    const list = function (title, items) {
      box.appendChild(el("h3", null, title));
      const ul = el("ul");
      if (items.length === 0) ul.appendChild(el("li", "status", "none"));
      for (const text of items) ul.appendChild(el("li", null, text));
      box.appendChild(ul);
    };
    list("Who waited behind whom", lock.pairs.map(function (p) {
      return p.waiter + " waited " + ns(p.ns) + " behind " + p.holder + " (" +
        percent(p.ns, waited(p.waiter)).toFixed(0) + "% of its wait here)";
    }));
    list("Waiters (where threads waited for it)", lock.waiters.map(function (s) { return ns(s.ns) + "  " + siteLabel(s); }));
    list("Holders (where the waiting was made: blame at the release)", lock.holders.map(function (s) {
      return ns(s.ns) + "  " + siteLabel(s);
    }));
    if (namesHolder(lock.kind)) {
      list("Inside its contended holds (held.contended)", lock.inside.map(function (s) {
        return ns(s.ns) + "  " + fmtPercent(percent(s.ns, lock.counts.held_ns)) + "  " +
          (s.caller === null ? s.function : s.caller + " -> " + s.function);
      }));
    }
    return box;
  }

  const locksPane = document.getElementById("locks-pane");
  let locksBuilt = false;

  function buildLocks() {
    if (locksBuilt) return;
    locksBuilt = true;
    const L = data.locks;
    if (!L.available) {
      locksPane.appendChild(el("p", "note", "This profile was recorded by a blameprof older than lock " +
        "tables (format version 1): it holds no per-lock counts. Record it again to see them."));
      return;
    }
    if (L.locks.length === 0) {
      locksPane.appendChild(el("p", "note", "No locks: no thread waited for a lock or event, and no " +
        "acquisition was sampled."));
    } else {
      locksPane.appendChild(el("h2", null, "Locks by blame (" + L.locks.length + "); click a lock for who waited behind whom, a heading to sort"));
      const table = sortableTable(lockColumns(function (r) { return r.name; }), L.locks, function (tr, lock) {
        tr.className = "lock";
        tr.addEventListener("click", function () {
          const next = tr.nextElementSibling;
          if (next && next.classList.contains("details-row")) {
            next.remove();
            tr.classList.remove("open");
            return;
          }
          const row = el("tr", "details-row");
          const td = el("td", "details");
          td.colSpan = 14;
          td.appendChild(lockDetails(lock));
          row.appendChild(td);
          tr.after(row);
          tr.classList.add("open");
        });
      });
      table.id = "lock-table";
      locksPane.appendChild(table);
    }
    if (L.groups.length > 0) {
      locksPane.appendChild(el("h2", null, "Groups (locks in one array, or made or first waited on at one site)"));
      const groups = sortableTable(lockColumns(function (g) { return g.name + " (" + g.members.length + " locks)"; }), L.groups);
      groups.id = "group-table";
      locksPane.appendChild(groups);
    }
    locksPane.appendChild(el("p", "note", "Exact: contended, try failed, waits. Sampled and scaled: " +
      "acquired~ (one acquisition in about " + L.acquisition_sampling_period + " per thread). Blame " +
      "and the waiting per site come from the lock's samples; who waited behind whom splits each " +
      "holder's blame over the waits recorded during its holds. avg hold: the average length of the " +
      "holds others waited for. held~: the holders' CPU time while others waited (mutexes and rwlock " +
      "writers). press.: the lock's waiting over the threads' running time (" + ns(L.running_ns) +
      "); '-' for events." + (L.acquisitions_counted ? "" : " Acquisitions were not counted in " +
      "some process ('-').") + (L.untabled_events > 0 ? " " + L.untabled_events + " lock events " +
      "found no room in the runtime's lock table and are in no row." : "")));
  }

  const threadsPane = document.getElementById("threads-pane");

  function buildThreads() {
    threadsPane.textContent = "";
    const cols = [
      { title: "pid", text: function (t) { return String(t.pid); }, key: function (t) { return t.pid; } },
      { title: "tid", text: function (t) { return String(t.tid); }, key: function (t) { return t.tid; } },
      { title: "name", left: true, text: function (t) { return t.name + (t.main ? " (main)" : ""); }, key: function (t) { return t.name; } },
      { title: "start routine", left: true, text: function (t) { return t.start_routine || "-"; }, key: function (t) { return t.start_routine || ""; } },
    ];
    metrics.forEach(function (d, m) {
      if (!state.shown[m]) return;
      cols.push({
        title: d.name,
        help: d.description,
        text: function (t) { return fmtMetric(t.totals[m], m) + "  " + fmtPercent(percent(t.totals[m], percentBase(m))); },
        key: function (t) { return t.totals[m]; },
      });
    });
    threadsPane.appendChild(el("h2", null, data.threads.length + " threads; % of " +
      (state.percentOf === "effort" && data.effort !== null ? "effort" : "each metric's total") +
      " (the Metrics menu picks the columns)"));
    const table = sortableTable(cols, data.threads);
    table.id = "thread-table";
    threadsPane.appendChild(table);
  }

  // ---------------------------------------------------------------- header and tabs

  (function header() {
    const title = data.title || data.summary[0][1];
    document.getElementById("title").textContent = title;
    document.title = "blameprof: " + title;
    const dl = document.getElementById("summary");
    for (const line of data.summary) {
      dl.appendChild(el("dt", null, line[0]));
      dl.appendChild(el("dd", null, line[1]));
    }
    const tbody = document.querySelector("#metric-table tbody");
    metrics.forEach(function (d, m) {
      const tr = el("tr");
      tr.appendChild(el("td", "text", d.name));
      tr.appendChild(el("td", null, fmtMetric(data.totals[m], m)));
      tr.appendChild(el("td", null, data.effort === null ? "-" : fmtPercent(percent(data.totals[m], data.effort))));
      tr.appendChild(el("td", "text", d.description));
      tbody.appendChild(tr);
    });
  })();

  const panes = { tree: treePane, flame: flamePane, locks: locksPane, threads: threadsPane };

  function showTab(tab) {
    const old = currentView();
    if (old) old.scrollTop = scroller.scrollTop;
    state.tab = tab;
    for (const b of document.querySelectorAll(".tab")) b.setAttribute("aria-selected", String(b.dataset.tab === tab));
    const vs = currentView();
    const pane = vs ? "tree" : tab;
    for (const name in panes) panes[name].hidden = name !== pane;
    document.getElementById("hot").disabled = !vs || !vs.hasHotPath;
    document.getElementById("collapse").disabled = !vs || vs.model === FLAT;
    if (vs) {
      if (!vs.opened) {
        vs.opened = true;
        vs.selected = vs.expandHotPath();
      }
      if (vs.query !== state.query) {
        showSearch();
      } else {
        renderTree(vs);
      }
      scroller.scrollTop = vs.scrollTop;
      renderWindow();
    } else if (tab === "flame") {
      buildFlames();
      for (const fg of flames) fg.draw();
    } else if (tab === "locks") {
      buildLocks();
    } else if (tab === "threads") {
      buildThreads();
    }
  }

  for (const b of document.querySelectorAll(".tab")) {
    b.addEventListener("click", function () { showTab(b.dataset.tab); });
  }

  showTab("top-down");
  const loadMs = performance.now();
  document.body.dataset.renderedMs = loadMs.toFixed(0);

  // ---------------------------------------------------------------- self-test

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  function click(target, x, y) {
    const r = target.getBoundingClientRect();
    const opts = { bubbles: true, cancelable: true, view: window,
      clientX: x === undefined ? r.left + r.width / 2 : x, clientY: y === undefined ? r.top + r.height / 2 : y };
    target.dispatchEvent(new MouseEvent("mousedown", opts));
    target.dispatchEvent(new MouseEvent("mouseup", opts));
    target.dispatchEvent(new MouseEvent("click", opts));
  }

  function snapshot(row) {
    const tog = row.querySelector(".tog");
    const cells = {};
    for (const c of row.querySelectorAll(".c")) {
      cells[c.dataset.col] = [c.querySelector(".v").textContent, c.querySelector(".p").textContent];
    }
    const loc = row.querySelector(".loc");
    return {
      i: Number(row.dataset.i),
      depth: Number(row.dataset.depth),
      name: row.querySelector(".name").textContent,
      inlined: row.querySelector(".tag") !== null,
      loc: loc ? loc.textContent : "",
      hot: row.classList.contains("hot"),
      match: row.classList.contains("match"),
      expanded: tog.hasAttribute("aria-expanded") ? tog.getAttribute("aria-expanded") === "true" : null,
      cells: cells,
    };
  }

  /** Scrolls through the rows from row `from` on, as a user would, and calls visit on each
   *  rendered row in order until it returns true (found: the row) or null (give up). */
  async function scan(from, visit) {
    let i = from;
    for (;;) {
      scroller.scrollTop = i * ROW;
      scroller.dispatchEvent(new Event("scroll"));
      await sleep(0);
      const rows = Array.from(win.querySelectorAll(".row"))
        .filter(function (r) { return Number(r.dataset.i) >= i; })
        .sort(function (a, b) { return Number(a.dataset.i) - Number(b.dataset.i); });
      if (rows.length === 0 || Number(rows[0].dataset.i) !== i) return undefined;
      for (const r of rows) {
        const verdict = visit(r);
        if (verdict === true) return r;
        if (verdict === null) return undefined;
        i = Number(r.dataset.i) + 1;
      }
    }
  }

  async function rowsFrom(from, count, within) {
    const out = [];
    await scan(from, function (r) {
      const s = snapshot(r);
      if (within !== undefined && s.depth <= within) return null;
      if (within === undefined || s.depth === within + 1) out.push(s);
      return out.length >= count ? null : false;
    });
    return out;
  }

  function pressTab(tab) {
    click(document.querySelector('.tab[data-tab="' + tab + '"]'));
  }

  async function typeInto(input, text) {
    input.focus();
    input.value = "";
    for (const ch of text) {
      input.value += ch;
      input.dispatchEvent(new InputEvent("input", { bubbles: true, data: ch, inputType: "insertText" }));
    }
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
    await sleep(20);
  }

  const steps = {
    tab: async function (s) {
      pressTab(s.tab);
      await sleep(0);
      return { tab: state.tab };
    },
    button: async function (s) {
      click(document.getElementById(s.id));
      await sleep(0);
      return { rows: currentView() ? currentView().rows.h.length : 0 };
    },
    rows: async function (s) {
      return { rows: await rowsFrom(0, s.count) };
    },
    expand: async function (s) {
      let from = 0;
      let row;
      const clicked = [];
      for (let k = 0; k < s.path.length; k++) {
        row = await scan(from, function (r) {
          const depth = Number(r.dataset.depth);
          if (depth < k || (k > 0 && depth === k - 1)) return null;
          return depth === k && r.querySelector(".name").textContent === s.path[k];
        });
        if (!row) return { error: "no row " + s.path.slice(0, k + 1).join(" > ") };
        const tog = row.querySelector(".tog");
        const i = Number(row.dataset.i);
        if (tog.getAttribute("aria-expanded") === "false") {
          click(tog);
          await sleep(0);
          clicked.push(true);
        } else {
          clicked.push(false);
        }
        from = i + 1;
        row = await scan(i, function (r) { return Number(r.dataset.i) === i; });
      }
      const node = snapshot(row);
      return { clicked: clicked, node: node, children: await rowsFrom(node.i + 1, 1e9, node.depth) };
    },
    search: async function (s) {
      await typeInto(searchBox, s.text);
      const vs = currentView();
      const matched = [];
      if (vs) {
        await scan(0, function (r) {
          if (r.classList.contains("match")) matched.push(snapshot(r));
          return matched.length >= (s.limit || 200) ? null : false;
        });
      }
      const frames = Array.from(document.querySelectorAll(".fr.match")).map(function (f) { return f.textContent; });
      return { status: searchStatus.textContent, matches: matched, rows: vs ? vs.rows.h.length : 0, frames: frames };
    },
    sort: async function (s) {
      const cell = treeHead.querySelector('.c[data-col="' + s.col + '"]');
      if (!cell) return { error: "no column " + s.col };
      click(cell);
      await sleep(0);
      return { sorted: treeHead.querySelector(".c.sorted").dataset.col };
    },
    percent: async function (s) {
      const radio = document.querySelector('input[name=percent][value="' + s.of + '"]');
      click(radio);
      await sleep(0);
      return { percentOf: state.percentOf };
    },
    table: async function (s) {
      pressTab(s.tab);
      await sleep(0);
      const table = document.getElementById(s.table);
      if (!table) return { error: "no table " + s.table, text: document.querySelector(".pane:not([hidden])").textContent };
      const heads = Array.from(table.querySelectorAll("thead th")).map(function (th) { return th.textContent; });
      const rows = Array.from(table.querySelectorAll("tbody tr")).filter(function (tr) {
        return !tr.classList.contains("details-row");
      }).map(function (tr) {
        return Array.from(tr.children).map(function (td) { return td.textContent; });
      });
      let details = null;
      if (s.open !== undefined) {
        const tr = table.querySelectorAll("tbody tr")[s.open];
        click(tr);
        await sleep(0);
        details = Array.from(tr.nextElementSibling.querySelectorAll("li")).map(function (li) { return li.textContent; });
      }
      return { heads: heads, rows: rows, details: details };
    },
    flame: async function (s) {
      pressTab("flame");
      await sleep(0);
      const section = flamePane.querySelector('.flame[data-metric="' + s.metric + '"]');
      if (!section) return { error: "no flame graph of " + s.metric };
      const box = section.querySelector(".flame-box");
      const frames = function () {
        return Array.from(box.querySelectorAll(".fr")).filter(function (f) { return f.textContent === s.frame; });
      };
      const widest = function () {
        return frames().sort(function (a, b) { return b.offsetWidth - a.offsetWidth; })[0];
      };
      let fr = widest();
      if (!fr) return { error: "no frame " + s.frame, drawn: box.querySelectorAll(".fr").length };
      const before = fr.getBoundingClientRect().width;
      const r = fr.getBoundingClientRect();
      fr.dispatchEvent(new MouseEvent("mouseover", { bubbles: true, clientX: r.left + 2, clientY: r.top + 2 }));
      const tipText = tip.hidden ? "" : tip.textContent;
      click(fr, r.left + 2, r.top + 2);
      await sleep(0);
      fr = widest();
      return {
        tip: tipText,
        before: before,
        after: fr ? fr.getBoundingClientRect().width : 0,
        box: box.getBoundingClientRect().width,
        info: section.querySelector(".flame-info").textContent,
        drawn: box.querySelectorAll(".fr").length,
      };
    },
  };

  async function selftest(spec) {
    const pre = document.getElementById("selftest");
    const out = { loadMs: loadMs, nodes: N, steps: [] };
    for (const step of spec) {
      let result;
      const start = performance.now();
      try {
        const run = steps[step.do];
        result = run ? await run(step) : { error: "unknown step " + step.do };
      } catch (e) {
        result = { error: String(e && e.stack ? e.stack : e) };
      }
      result.ms = performance.now() - start;
      out.steps.push(result);
    }
    out.errors = window.blameprofErrors.slice();
    out.done = true;
    pre.textContent = JSON.stringify(out);
    pre.hidden = false;
  }

  const testRequest = /^#selftest=(.*)$/.exec(location.hash);
  if (testRequest) selftest(JSON.parse(decodeURIComponent(testRequest[1])));
})();
