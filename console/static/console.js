// Chronolog console: the timeline chart (uPlot), the topic filter, the time picker,
// the record table and the live tail. Plain browser JavaScript, no build step, no network beyond
// this console's own server.
"use strict";
window.chronolog = (function () {
  const iso = ms => new Date(ms).toISOString();

  function recordsUrl(topic, partition, ms) {
    const q = new URLSearchParams();
    if (partition !== null) q.set("partition", partition);
    q.set("time", iso(ms));
    return "/topics/" + encodeURIComponent(topic) + "/records?" + q.toString();
  }

  // An event-time bar opens exactly its records: those with from <= timestamp < until.
  function windowUrl(topic, partition, from, until) {
    const q = new URLSearchParams();
    if (partition !== null) q.set("partition", partition);
    q.set("from", iso(from)); q.set("until", iso(until));
    return "/topics/" + encodeURIComponent(topic) + "/records?" + q.toString();
  }

  function barUrl(data, partition, i) {
    const b = data.bounds;
    return data.by === "event" ? windowUrl(data.topic, partition, b[i], b[i + 1])
      : recordsUrl(data.topic, partition, b[i]);
  }

  function bucketAt(bounds, ms) {
    // bounds ascend; bucket i is [bounds[i], bounds[i+1])
    let lo = 0, hi = bounds.length - 2;
    if (ms < bounds[0] || ms >= bounds[bounds.length - 1]) return -1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (bounds[mid] <= ms) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

  // options: height (px), zoom (drag to zoom: reloads this page with from/to; default on).
  function drawTimeline(elId, data, partition, options) {
    const opt = Object.assign({ height: 320, zoom: true }, options || {});
    const el = document.getElementById(elId);
    const b = data.bounds;
    const xs = b.slice(0, -1), ys = data.counts;
    const opts = {
      width: Math.max(600, el.clientWidth || 1000),
      height: opt.height,
      ms: 1,
      tzDate: ts => uPlot.tzDate(new Date(ts), "Etc/UTC"),  // axes in UTC, like every time shown
      legend: { show: false },  // the line under the chart says the hovered bucket exactly
      cursor: { drag: { x: opt.zoom, y: false, setScale: false }, points: { show: false } },
      scales: { x: { time: true, range: [b[0], b[b.length - 1]] }, y: { range: (u, lo, hi) => [0, Math.max(1, hi) * 1.05] } },
      axes: [{}, { label: "records", size: 70 }],
      series: [
        { label: "bucket start (UTC)", value: (u, v) => v == null ? "—" : iso(v) },
        {
          label: "records", stroke: "#2b6cb0", fill: "rgba(43,108,176,0.55)", width: 1,
          paths: uPlot.paths.bars({ size: [0.92, 120], align: 1 }), points: { show: false },
        },
      ],
      hooks: {
        setSelect: [u => {
          if (!opt.zoom || u.select.width < 4) return;
          const from = Math.floor(u.posToVal(u.select.left, "x"));
          const to = Math.ceil(u.posToVal(u.select.left + u.select.width, "x"));
          const q = new URLSearchParams(location.search);
          q.delete("range"); q.set("from", iso(from)); q.set("to", iso(to));
          location.search = q.toString();
        }],
      },
    };
    // Under the chart: the hovered bucket's range and its count per partition.
    const detail = document.createElement("div");
    detail.className = "bucket-detail";
    detail.textContent = "Hover over a bar for its count per partition.";
    opts.hooks.setCursor = [u => {
      const i = u.cursor.left == null || u.cursor.left < 0 ? -1
        : bucketAt(b, u.posToVal(u.cursor.left, "x"));
      if (i < 0) return;
      const per = data.partition_counts;
      const parts = per ? Object.keys(per).map(p => "p" + p + ": " + per[p][i].toLocaleString("en-US"))
        : Object.keys(data.offsets || {}).map(
          p => "p" + p + ": " + (data.offsets[p][i + 1] - data.offsets[p][i]).toLocaleString("en-US"));
      detail.textContent = iso(b[i]) + " – " + iso(b[i + 1]) + ": " + ys[i].toLocaleString("en-US")
        + " records" + (parts.length > 1 ? " (" + parts.join(", ") + ")" : "");
      detail.dataset.bucket = i;
    }];
    const u = new uPlot(opts, [xs, ys], el);
    el.appendChild(detail);
    let down = null;
    u.over.addEventListener("mousedown", e => { down = [e.clientX, e.clientY]; });
    u.over.addEventListener("click", e => {
      if (down && Math.abs(e.clientX - down[0]) > 3) return; // a drag, not a click
      const ms = u.posToVal(e.clientX - u.over.getBoundingClientRect().left, "x");
      const i = bucketAt(b, ms);
      if (i >= 0) location.href = barUrl(data, partition, i);
    });
    api.charts[elId] = u;
    api.chart = u;
    api.timeline = data;
    // The table of non-empty buckets is built when first opened (the server does not render it).
    const details = document.getElementById("bucket-details");
    if (details) details.addEventListener("toggle", () => {
      const body = details.querySelector("tbody");
      if (!details.open || body.rows.length) return;
      for (let i = 0; i < ys.length; i++) {
        if (!ys[i]) continue;
        const tr = body.insertRow();
        const a = document.createElement("a");
        a.href = barUrl(data, partition, i); a.textContent = iso(b[i]);
        tr.insertCell().appendChild(a);
        tr.insertCell().textContent = iso(b[i + 1]);
        const n = tr.insertCell(); n.className = "n"; n.textContent = ys[i].toLocaleString("en-US");
      }
    });
    return u;
  }

  // Where bucket i's bar is, relative to the chart's plotting area (for tests and tools).
  function barCenter(i) {
    const u = api.chart, b = api.timeline.bounds;
    return { x: u.valToPos((b[i] + b[i + 1]) / 2, "x"), y: u.over.clientHeight - 5,
             width: u.over.clientWidth, height: u.over.clientHeight };
  }

  function filterTable(inputId, tableId) {
    const input = document.getElementById(inputId), table = document.getElementById(tableId);
    if (!input || !table) return;
    input.addEventListener("input", () => {
      const needle = input.value.trim().toLowerCase();
      for (const tr of table.tBodies[0].rows)
        tr.hidden = !tr.dataset.topic.toLowerCase().includes(needle);
    });
  }

  function timePicker(pickerId, textId) {
    const picker = document.getElementById(pickerId), text = document.getElementById(textId);
    if (!picker || !text) return;
    picker.addEventListener("change", () => {
      let v = picker.value;  // "2026-11-21T10:32" or with seconds; taken as UTC
      if (v.length === 16) v += ":00";
      if (v) text.value = v + "Z";
    });
  }

  // The record browser's compact rows: a click (or Enter/Space) on a row shows the whole
  // record in the row below it; selecting text in a row does not toggle it.
  function recordTable(tableId) {
    const table = document.getElementById(tableId);
    if (!table) return;
    const toggle = (tr, open) => {
      const detail = tr.nextElementSibling;
      if (!detail || !detail.classList.contains("detail")) return;
      open = open === undefined ? detail.hidden : open;
      detail.hidden = !open;
      tr.setAttribute("aria-expanded", String(open));
      tr.classList.toggle("open", open);
    };
    table.tBodies[0].addEventListener("click", e => {
      const tr = e.target.closest("tr.record");
      if (!tr || String(window.getSelection() || "")) return;
      toggle(tr);
    });
    table.tBodies[0].addEventListener("keydown", e => {
      const tr = e.target.closest("tr.record");
      if (!tr || (e.key !== "Enter" && e.key !== " ")) return;
      e.preventDefault();
      toggle(tr);
    });
    // A filter's text is marked in the previews (the server put it in view).
    const needle = (table.dataset.needle || "").toLowerCase(), where = table.dataset.in || "both";
    if (needle) {
      const cells = where === "both" ? "td.preview" : "td.preview." + where;
      for (const td of table.querySelectorAll(cells)) {
        const text = td.textContent, lower = text.toLowerCase();
        if (!lower.includes(needle) || text.length !== lower.length) continue;
        td.textContent = "";
        let at = 0;
        for (let i = lower.indexOf(needle); i >= 0; i = lower.indexOf(needle, at)) {
          td.append(text.slice(at, i));
          const mark = document.createElement("mark");
          mark.textContent = text.slice(i, i + needle.length);
          td.append(mark);
          at = i + needle.length;
        }
        td.append(text.slice(at));
      }
    }
    const all = open => () => table.querySelectorAll("tr.record").forEach(tr => toggle(tr, open));
    const expand = document.getElementById("expand-all"), collapse = document.getElementById("collapse-all");
    if (expand) expand.addEventListener("click", all(true));
    if (collapse) collapse.addEventListener("click", all(false));
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function liveTail(url) {
    const status = document.getElementById("tail-status");
    const body = document.querySelector("#tail tbody");
    let cursor = null, es = null, retry = null;
    const setStatus = s => { status.textContent = s; api.tailLog.push(s); };
    function open() {
      if (es) return;
      const u = cursor ? url + (url.includes("?") ? "&" : "?") + "from=" + encodeURIComponent(cursor) : url;
      es = new EventSource(u);
      es.addEventListener("ready", e => { cursor = JSON.parse(e.data).cursor; setStatus("live"); });
      es.addEventListener("skipped", e => {
        const tr = document.createElement("tr");
        cell(tr, "skipped " + JSON.parse(e.data).count + " records to keep up", "note").colSpan = 5;
        body.prepend(tr);
      });
      es.addEventListener("record", e => {
        const d = JSON.parse(e.data);
        cursor = d.cursor;
        const tr = document.createElement("tr");
        tr.className = "record";
        tr.dataset.partition = d.partition; tr.dataset.offset = d.offset;
        cell(tr, d.partition, "n"); cell(tr, d.offset, "n offset"); cell(tr, d.time + " " + d.timestamp_type, "ts");
        for (const v of [d.key, d.value]) {
          const pre = document.createElement("pre");
          pre.className = "v kind-" + v.kind; pre.dataset.kind = v.kind; pre.textContent = v.text;
          const td = document.createElement("td"); td.appendChild(pre); tr.appendChild(td);
        }
        body.prepend(tr);
        while (body.rows.length > 500) body.deleteRow(-1);
      });
      const again = () => { close(); setStatus("reconnecting"); retry = setTimeout(open, 2000); };
      es.addEventListener("failed", again);  // the server lost the broker: try again
      es.onerror = again;
    }
    function close() {
      if (retry) { clearTimeout(retry); retry = null; }
      if (es) { es.close(); es = null; }
    }
    document.addEventListener("visibilitychange", () => {
      if (document.hidden) { close(); setStatus("paused (tab hidden)"); } else open();
    });
    if (document.hidden) setStatus("paused (tab hidden)"); else open();
  }

  const api = { drawTimeline, barCenter, bucketAt, filterTable, timePicker, recordTable, liveTail, tailLog: [],
                chart: null, timeline: null, charts: {} };
  return api;
})();
