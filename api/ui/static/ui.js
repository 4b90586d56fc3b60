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

async function setUpGraph(box) {
  const status = document.getElementById("graph-status");
  status.textContent = "loading…";
  await loadScript("/ui/static/cytoscape.min.js");
  const data = await (await fetch(box.dataset.src, { credentials: "same-origin" })).json();
  const big = data.nodes.length > 150;
  graphView = window.cytoscape({
    container: box,
    elements: { nodes: data.nodes, edges: data.edges },
    wheelSensitivity: 0.3,
    style: [
      {
        selector: "node",
        style: {
          label: "data(id)",
          "font-size": 9,
          "min-zoomed-font-size": 6,
          "text-wrap": "wrap",
          "text-max-width": 90,
          width: "mapData(weight, 0, 200, 10, 40)",
          height: "mapData(weight, 0, 200, 10, 40)",
          "background-color": "#4a6fa5",
          color: "#1f2933",
        },
      },
      { selector: `node[id = "${data.initial}"]`, style: { "background-color": "#1f2933", shape: "diamond" } },
      {
        selector: "edge",
        style: {
          width: "data(width)",
          "line-color": "data(colour)",
          "target-arrow-color": "data(colour)",
          "target-arrow-shape": "triangle",
          "curve-style": big ? "haystack" : "bezier",
          opacity: 0.8,
        },
      },
      { selector: "edge:selected, edge.hover", style: { label: "data(label)", "font-size": 8, opacity: 1 } },
      { selector: ".found", style: { "border-width": 4, "border-color": "#f29900" } },
      { selector: ".hidden", style: { display: "none" } },
    ],
    layout: big
      ? { name: "concentric", concentric: (n) => n.data("weight"), levelWidth: () => 20, animate: false }
      : { name: "breadthfirst", directed: true, roots: `[id = "${data.initial}"]`, spacingFactor: 1.1, animate: false },
  });
  graphView.on("tap", "node", (e) => {
    window.location.href = "/ui/technique?name=" + encodeURIComponent(e.target.id());
  });
  graphView.on("tap", "edge", (e) => {
    const d = e.target.data();
    window.location.href = `/ui/transition?source=${encodeURIComponent(d.source)}&target=${encodeURIComponent(d.target)}`;
  });
  graphView.on("mouseover", "edge", (e) => e.target.addClass("hover"));
  graphView.on("mouseout", "edge", (e) => e.target.removeClass("hover"));
  const names = document.getElementById("graph-names");
  names.innerHTML = data.nodes.map((n) => `<option value="${n.data.id.replace(/"/g, "&quot;")}">`).join("");
  document.getElementById("graph-find").addEventListener("change", (e) => {
    graphView.nodes().removeClass("found");
    const hit = graphView.getElementById(e.target.value);
    if (hit.nonempty()) {
      hit.addClass("found");
      graphView.animate({ center: { eles: hit }, zoom: 1.5 }, { duration: 300 });
    }
  });
  document.getElementById("graph-min").addEventListener("input", (e) => {
    const min = Number(e.target.value) || 0;
    graphView.edges().forEach((edge) => edge.toggleClass("hidden", edge.data("examples") < min));
  });
  box.dataset.ready = "true";
  const hidden = data.transitions_total - data.edges.length;
  status.textContent = `${data.nodes.length} techniques, ${data.edges.length} transitions` +
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

document.addEventListener("DOMContentLoaded", boot);
document.addEventListener("htmx:afterSettle", (e) => {
  if (e.target !== document.body) return;
  // htmx keeps focus on an element whose id survives the swap; after an action the next keystroke
  // must reach the shortcuts, not the previous example's reason field.
  if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
  boot();
});
