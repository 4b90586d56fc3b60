// The curation workspace's small amount of behaviour: keyboard shortcuts of the review queue, the
// graph view (cytoscape), the live events of a job (EventSource), Ctrl+Enter in the Cypher console.
// htmx (hx-boost) swaps the page body on navigation, so everything is set up again after each swap.
"use strict";

let jobSource = null;
let graphView = null;

function typing(event) {
  const t = event.target;
  return t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName));
}

function follow(id) {
  const link = document.getElementById(id);
  if (link) link.click();
}

document.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.id === "cypher-query") {
    event.preventDefault();
    document.getElementById("cypher-form").requestSubmit();
    return;
  }
  if (typing(event) || event.ctrlKey || event.metaKey || event.altKey || !document.getElementById("example")) return;
  const actions = {
    j: () => follow("next"),
    k: () => follow("prev"),
    a: () => document.getElementById("approve-form")?.requestSubmit(),
    r: () => document.getElementById("reason")?.focus(),
    s: () => document.getElementById("split-target")?.focus(),
    "/": () => document.querySelector("#filters select")?.focus(),
  };
  const act = actions[event.key];
  if (act) {
    event.preventDefault();
    act();
  }
});

// -- the graph ----------------------------------------------------------------------------------------

function loadScript(src) {
  return new Promise((resolve, reject) => {
    if (document.querySelector(`script[src="${src}"]`) && window.cytoscape) return resolve();
    const s = document.createElement("script");
    s.src = src;
    s.onload = resolve;
    s.onerror = reject;
    document.head.appendChild(s);
  });
}

// Build an element: el("a", {href: "…"}, "text", child…). Text goes in as text, never as HTML.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

const techniqueUrl = (name) => "/ui/technique?name=" + encodeURIComponent(name);
const transitionUrl = (d) => `/ui/transition?source=${encodeURIComponent(d.source)}&target=${encodeURIComponent(d.target)}`;
const times = (v) => (v === null || v === undefined ? "–" : `${v.toFixed(2)}×`);

function statsList(rows) {
  const dl = el("dl", { class: "stats" });
  for (const [k, v] of rows) dl.append(el("dt", {}, k), el("dd", {}, String(v)));
  return dl;
}

// The neighbourhood of a node stands out; everything else fades (click the background to clear).
function focusOn(cy, eles) {
  cy.elements().removeClass("faded focus");
  if (!eles) return;
  cy.elements().not(eles).addClass("faded");
  eles.addClass("focus");
}

function showNode(cy, panel, name) {
  const node = cy.getElementById(name);
  panel.replaceChildren(el("h2", {}, name));
  if (node.empty()) {
    panel.append(el("p", { class: "muted" }, "No transitions lead to or from this technique yet."));
  } else {
    focusOn(cy, node.closedNeighborhood());
    const out = node.outgoers("edge").sort((a, b) => b.data("examples") - a.data("examples"));
    const incoming = node.incomers("edge");
    const count = (edges) => edges.reduce((n, e) => n + e.data("examples"), 0);
    panel.append(statsList([
      ["transitions out", out.length], ["examples out", count(out)],
      ["transitions in", incoming.length], ["examples in", count(incoming)],
    ]));
    if (out.length) {
      panel.append(el("h3", {}, "Next techniques, most examples first"));
      const list = el("ol", { class: "succ" });
      out.slice(0, 10).forEach((e) => {
        const a = el("a", { href: transitionUrl(e.data()), "data-edge": e.id() }, e.data("target"));
        a.addEventListener("click", (ev) => {
          ev.preventDefault();
          cy.$(":selected").unselect();
          e.select();
          showEdge(cy, panel, e);
        });
        list.append(el("li", {}, a, ` · ${e.data("examples")} ex · ${times(e.data("speedup"))}`));
      });
      panel.append(list);
    }
  }
  panel.append(el("p", {}, el("a", { href: techniqueUrl(name), id: "panel-open" }, "Open the technique page →")));
  panel.dataset.shows = name;
}

async function showEdge(cy, panel, edge) {
  const d = edge.data();
  focusOn(cy, edge.union(edge.connectedNodes()));
  panel.replaceChildren(el("h2", {}, el("a", { href: techniqueUrl(d.source) }, d.source), " → ",
    el("a", { href: techniqueUrl(d.target) }, d.target)));
  panel.append(statsList([
    ["examples", d.examples], ["verified", d.verified], ["rejected", d.rejected],
    ["success rate", d.success === null || d.success === undefined ? "–" : `${Math.round(d.success * 100)} %`],
    ["mean speedup", times(d.speedup)], ["median speedup", times(d.median)],
  ]));
  const list = el("ol", { class: "top-examples" });
  panel.append(el("h3", {}, "Top examples"), list,
    el("p", {}, el("a", { href: transitionUrl(d), id: "panel-open" }, "All examples of this transition →")));
  panel.dataset.shows = d.id;
  const query = `?source=${encodeURIComponent(d.source)}&target=${encodeURIComponent(d.target)}`;
  const response = await fetch("/ui/graph/examples" + query, { credentials: "same-origin" });
  if (panel.dataset.shows !== d.id) return; // another click came first
  if (!response.ok) {
    list.replaceWith(el("p", { class: "muted" }, "examples unavailable"));
    return;
  }
  for (const e of await response.json()) {
    list.append(el("li", {}, el("a", { href: `/ui/examples/${encodeURIComponent(e.id)}` }, e.task),
      ` · ${e.speedup} · ${e.status}`));
  }
}

async function setUpGraph(box) {
  const status = document.getElementById("graph-status");
  const panel = document.getElementById("graph-panel");
  status.textContent = "loading…";
  await loadScript("/ui/static/cytoscape.min.js");
  const data = await (await fetch(box.dataset.src, { credentials: "same-origin" })).json();
  const big = data.nodes.length > 150;
  const cy = window.cytoscape({
    container: box,
    elements: { nodes: data.nodes, edges: data.edges },
    wheelSensitivity: 0.3,
    selectionType: "single",
    style: [
      {
        selector: "node",
        style: {
          label: "data(id)",
          "font-size": 10,
          "min-zoomed-font-size": 7,
          "text-wrap": "wrap",
          "text-max-width": 150,
          "text-valign": "center",
          "text-halign": "right",
          "text-margin-x": 4,
          "text-background-color": "#fff",
          "text-background-opacity": 0.8,
          width: "mapData(weight, 0, 200, 12, 40)",
          height: "mapData(weight, 0, 200, 12, 40)",
          "background-color": "#4a6fa5",
          color: "#1f2933",
        },
      },
      { selector: "node.initial", style: { "background-color": "#1f2933", shape: "diamond" } },
      {
        selector: "edge",
        style: {
          width: "data(width)",
          "line-color": "data(colour)",
          "target-arrow-color": "data(colour)",
          "target-arrow-shape": "triangle",
          "curve-style": big ? "haystack" : "bezier",
          opacity: 0.7,
        },
      },
      { selector: "edge:selected, edge.hover", style: { label: "data(label)", "font-size": 9, opacity: 1, "text-background-color": "#fff", "text-background-opacity": 0.9 } },
      { selector: "node:selected, .found", style: { "border-width": 4, "border-color": "#f29900" } },
      { selector: ".faded", style: { opacity: 0.12 } },
      { selector: "edge.focus", style: { opacity: 1 } },
      { selector: ".hidden", style: { display: "none" } },
    ],
  });
  cy.getElementById(data.initial).addClass("initial");
  // Layered, left to right: the initial technique first, each step one layer further; nodes that
  // nothing leads to start layers of their own. A layer is a column, so its labels do not collide.
  const roots = cy.nodes().filter((n) => n.id() === data.initial || n.indegree(false) === 0);
  cy.layout({
    name: "breadthfirst",
    directed: true,
    roots: roots.nonempty() ? roots : undefined,
    spacingFactor: big ? 0.9 : 1.15,
    avoidOverlap: true,
    animate: false,
    transform: (node, at) => ({ x: at.y * 1.6, y: at.x * 0.7 }),
  }).run();
  cy.fit(undefined, 24);
  graphView = cy;
  cy.on("tap", "node", (e) => showNode(cy, panel, e.target.id()));
  cy.on("tap", "edge", (e) => showEdge(cy, panel, e.target));
  cy.on("tap", (e) => {
    if (e.target === cy) focusOn(cy, null);
  });
  cy.on("mouseover", "edge", (e) => e.target.addClass("hover"));
  cy.on("mouseout", "edge", (e) => e.target.removeClass("hover"));
  const all = data.nodes.map((n) => n.data.id).concat(data.unlinked).sort();
  const names = document.getElementById("graph-names");
  names.replaceChildren(...all.map((n) => el("option", { value: n })));
  const find = (name) => {
    cy.nodes().removeClass("found");
    if (!all.includes(name)) return;
    const hit = cy.getElementById(name);
    showNode(cy, panel, name);
    if (hit.nonempty()) {
      hit.addClass("found");
      const zoom = Math.max(cy.zoom(), 1.2);
      const at = hit.position();
      cy.animate({ zoom, pan: { x: cy.width() / 2 - at.x * zoom, y: cy.height() / 2 - at.y * zoom } }, { duration: 250 });
    }
  };
  const input = document.getElementById("graph-find");
  input.addEventListener("change", (e) => find(e.target.value));
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") find(e.target.value);
  });
  document.getElementById("graph-fit").addEventListener("click", () => {
    focusOn(cy, null);
    cy.fit(undefined, 20);
  });
  document.getElementById("graph-min").addEventListener("input", (e) => {
    const min = Number(e.target.value) || 0;
    cy.edges().forEach((edge) => edge.toggleClass("hidden", edge.data("examples") < min));
  });
  const unlinked = document.querySelector("#graph-unlinked ul");
  document.getElementById("graph-unlinked-count").textContent = data.unlinked.length;
  unlinked.replaceChildren(...data.unlinked.map((n) => el("li", {}, el("a", { href: techniqueUrl(n) }, n))));
  box.dataset.ready = "true";
  const hidden = data.transitions_total - data.edges.length;
  status.textContent = `${all.length} techniques, ${data.edges.length} transitions` +
    (hidden > 0 ? ` (the ${hidden} with fewest examples not drawn)` : "");
}

// -- a job's live events ------------------------------------------------------------------------------

function setUpJob(box) {
  const budget = Number(box.dataset.budget) || 1;
  const list = document.getElementById("job-events");
  const rows = document.querySelector("#job-candidates tbody");
  const live = !["succeeded", "failed", "cancelled"].includes(box.dataset.state);
  let count = 0;
  jobSource = new EventSource(box.dataset.events);
  const show = (kind, payload) => {
    count += 1;
    document.getElementById("job-events-count").textContent = count;
    const data = payload.data || {};
    const li = document.createElement("li");
    li.className = `ev ev-${kind}`;
    li.textContent = `${kind}` + (data.state ? ` ${data.state}` : "") +
      (data.candidate ? ` #${data.candidate.index} ${data.candidate.technique || ""}` : "") +
      (data.evaluations_used !== undefined ? ` · ${data.evaluations_used}/${budget} evaluations` : "");
    list.appendChild(li);
    if (data.evaluations_used !== undefined) {
      document.getElementById("job-used").textContent = data.evaluations_used;
      document.getElementById("job-progress").style.width = `${Math.min(100, (100 * data.evaluations_used) / budget)}%`;
    }
    if (data.best_speedup) document.getElementById("job-best").textContent = `${data.best_speedup.toFixed(2)}×`;
    if (data.state) document.getElementById("job-state").textContent = data.state;
    if (kind === "candidate" && live && data.candidate) {
      const c = data.candidate;
      const ev = c.evaluation;
      const verdict = ev ? ev.error_kind || (ev.passed ? "passed" : "failed") : c.proposal_failure || "no code";
      const tr = document.createElement("tr");
      for (const cell of [c.index, c.path.join(" → "), c.technique || "–", verdict,
        ev && ev.speedup ? `${ev.speedup.toFixed(2)}×` : "–", c.reward.toFixed(3)]) {
        const td = document.createElement("td");
        td.textContent = cell;
        tr.appendChild(td);
      }
      rows.appendChild(tr);
    }
  };
  for (const kind of ["state", "started", "candidate", "new_best", "iteration", "finished"]) {
    jobSource.addEventListener(kind, (e) => show(kind, JSON.parse(e.data)));
  }
  jobSource.addEventListener("end", () => {
    jobSource.close();
    jobSource = null;
    box.dataset.ended = "true";
    // The finished job's result (best code, path, every verdict) is rendered by the server.
    if (live) window.setTimeout(() => window.location.reload(), 300);
  });
  jobSource.addEventListener("error", () => {
    if (jobSource && jobSource.readyState === EventSource.CLOSED) box.dataset.ended = "true";
  });
}

function boot() {
  if (jobSource) {
    jobSource.close();
    jobSource = null;
  }
  if (graphView) {
    graphView.destroy();
    graphView = null;
  }
  const graph = document.getElementById("graph");
  if (graph) setUpGraph(graph).catch((e) => (document.getElementById("graph-status").textContent = String(e)));
  const job = document.getElementById("job");
  if (job) setUpJob(job);
  document.querySelector("#queue-items li.current")?.scrollIntoView({ block: "nearest" });
}

// The queue's "all shown" box checks (or clears) every example's box for a bulk review.
document.addEventListener("change", (event) => {
  if (event.target.id !== "bulk-all") return;
  for (const box of document.querySelectorAll("#queue-items input.pick")) box.checked = event.target.checked;
});

document.addEventListener("DOMContentLoaded", boot);
document.addEventListener("htmx:afterSettle", (e) => {
  if (e.target !== document.body) return;
  // htmx keeps focus on an element whose id survives the swap; after an action the next keystroke
  // must reach the shortcuts, not the previous example's reason field.
  if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
  boot();
});
