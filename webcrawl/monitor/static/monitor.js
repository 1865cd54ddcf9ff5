// webcrawl monitor: asks /api/status every second and redraws the page (no library).
"use strict";

const $ = (id) => document.getElementById(id);
const fmt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en"));

function ago(seconds) {
  if (seconds < 90) return Math.max(0, Math.round(seconds)) + " s";
  if (seconds < 5400) return Math.round(seconds / 60) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function fill(table, rows) {
  const body = $(table).tBodies[0];
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    for (const cell of cells) {
      const td = document.createElement("td");
      td.textContent = cell;
      if (typeof cell === "number") td.className = "n";
      tr.appendChild(td);
    }
    return tr;
  }));
}

// pages stored per second between successive samples
function rates(history) {
  const out = [];
  for (let i = 1; i < history.length; i++) {
    const dt = history[i][0] - history[i - 1][0];
    if (dt > 0) out.push([history[i][0], Math.max(0, history[i][1] - history[i - 1][1]) / dt]);
  }
  return out;
}

function chart(points) {
  if (points.length < 2) {
    $("line").setAttribute("points", "");
    $("chart-note").textContent = "Collecting samples…";
    return;
  }
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const top = Math.max(1, ...points.map((p) => p[1]));
  $("line").setAttribute("points", points.map((p) =>
    `${(600 * (p[0] - t0) / Math.max(1, t1 - t0)).toFixed(1)},${(145 - 140 * p[1] / top).toFixed(1)}`
  ).join(" "));
  $("chart-note").textContent =
    `Last ${ago(t1 - t0)}; peak ${top.toFixed(1)} pages/s, now ${points[points.length - 1][1].toFixed(1)}.`;
}

function render(s) {
  $("crawl").textContent = s.crawl;
  $("where").textContent = `Redis ${s.redis}; store ${s.store}; ${s.shards} shards`;
  for (const key of ["stored", "queued", "leased", "seen", "failed"]) $(key).textContent = fmt(s[key]);
  $("alive").textContent = fmt(s.workers.length);
  const r = rates(s.history);
  $("rate").textContent = r.length ? r[r.length - 1][1].toFixed(1) : "–";
  chart(r);
  fill("workers", s.workers.map((w) => [w.id, w.state || "?", w.pages, w.rate, w.errors,
    ago(s.now - w.started), ago(s.now - w.last_seen) + " ago"]));
  $("frontier").textContent = `${fmt(s.queued)} queued (${fmt(s.queued_in_store)} in the store), ` +
    `${fmt(s.leased)} leased, ${fmt(s.hosts_queued)} hosts with queued requests; the largest:`;
  fill("hosts", Object.entries(s.queued_per_host).map(([host, n]) => [host, n]));
  $("revisits").textContent = s.revisits_scheduled
    ? `${fmt(s.revisits_scheduled)} revisits scheduled, ${fmt(s.revisit_due)} due now` +
      (s.next_revisit ? `; next in ${ago(s.next_revisit - s.now)}` : "")
    : "No revisits scheduled.";
  const f = s.freshness || {};
  if (f.pages) {
    $("fresh").textContent = (100 * f.fresh_share).toFixed(1) + " %";
    $("freshness").textContent = `Of ${fmt(f.pages)} pages with a change-rate estimate, ` +
      `${(100 * f.fresh_share).toFixed(1)} % are expected to be as stored; ` +
      `${f.missed_per_hour.toFixed(2)} changes an hour are expected to go unseen ` +
      `(of ${f.changes_per_hour.toFixed(2)}).`;
  } else {
    $("fresh").textContent = "–";
    $("freshness").textContent = "No change-rate estimates yet.";
  }
  fill("dead", s.dead_paths.map((d) => [d.url, d.failures]));
  trust(s.sitemap_trust);
}

// hosts' sitemap lastmod trust: distrusted first, then by claims seen (as webcrawl status)
function trust(t) {
  if (!t.hosts) {
    $("trust").textContent = "No host's sitemap lastmod trust recorded.";
  } else {
    $("trust").textContent = `Lastmod trust of ${fmt(t.hosts)} hosts` +
      (t.truncated ? ` (only ${fmt(t.read)} read: the counts and rows are theirs)` : "") +
      `: ${fmt(t.distrusted)} distrusted, ${fmt(t.trusted)} trusted, ${fmt(t.unknown)} unknown ` +
      "(too few claims tested); distrusted first:";
  }
  const tenths = (n) => Math.round(10 * n) / 10;
  fill("trust-hosts", t.listed.map((h) => [h.host, h.state, h.claims, tenths(h.confirmed),
    tenths(h.refuted), Math.round(100 * h.precision) / 100]));
  const more = t.hosts - t.listed.length;
  $("trust-more").textContent = more > 0 ? `and ${fmt(more)} more` : "";
}

async function tick() {
  try {
    const answer = await fetch("/api/status", { cache: "no-store" });
    const data = await answer.json();
    if (data.status && data.status.crawl) render(data.status);
    $("error").hidden = !data.error;
    $("error").textContent = data.error ? "Cannot read the crawl: " + data.error : "";
    $("updated").textContent = new Date().toLocaleTimeString("en-GB");
  } catch (err) {
    $("error").hidden = false;
    $("error").textContent = "The monitor does not answer (" + err.message + ").";
  }
}

tick();
setInterval(tick, 1000);
