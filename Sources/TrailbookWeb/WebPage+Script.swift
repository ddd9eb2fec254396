extension WebPage {
    /// The page's script: reads pages of the list from `api/jobs`, applies the event stream (`api/events`) to the
    /// rows, and posts actions to `api/action`. Every text goes in with `textContent`, never as HTML.
    static let script = #"""
        "use strict";
        (function () {
          const $ = (id) => document.getElementById(id);
          const token = document.querySelector('meta[name="trailbook-token"]').content;
          const readOnly = document.querySelector('meta[name="trailbook-read-only"]').content === "true";
          const terminal = new Set(["succeeded", "failed", "cancelled"]);
          const unfinished = ["queued", "running", "paused", "needs_retry"];
          const state = {
            // A page is read by its cursor (`before`, null for the newest); `newer` holds the cursors of the pages
            // before it, for "Newer".
            page: 1, before: null, newer: [], nextBefore: null, olderWanted: false, size: 100, more: false,
            jobs: new Map(), order: [], counts: {}, selected: new Set(),
            logs: new Map(), hosts: new Map(), lastSeq: null, paused: false, dirty: false, detail: null,
          };
          if (readOnly) { document.body.classList.add("read-only"); $("readonly").hidden = false; }

          function el(tag, text, cls) {
            const e = document.createElement(tag);
            if (text !== undefined && text !== null) e.textContent = String(text);
            if (cls) e.className = cls;
            return e;
          }
          function filter() { return { state: $("state").value, kind: $("kind").value }; }
          function bytes(n) {
            const units = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
            while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
            return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
          }
          function amount(n, unit) { return unit === "bytes" ? bytes(n) : n + " " + unit; }
          // A long step that moves none of the job's units, worded as `show` does: "listing the destination:
          // 41 000 objects".
          function phase(p) {
            if (p.unit === "bytes") return p.label + ": " + bytes(p.count);
            return p.label + ": " + String(p.count).replace(/\B(?=(\d{3})+(?!\d))/g, " ") + " " + p.unit;
          }
          function duration(s) {
            if (s === null || s === undefined) return "";
            s = Math.round(s); const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
            return h ? h + "h " + m + "m" : m ? m + "m " + r + "s" : r + "s";
          }
          // JSON laid out for reading: strings as the server escaped them (visible \u202e, \n), not escaped again.
          function pretty(v, indent) {
            indent = indent || "";
            const inner = indent + "  ";
            if (v === null || v === undefined) return "null";
            if (typeof v === "string") return '"' + v + '"';
            if (Array.isArray(v)) return v.length ? "[\n" + v.map((x) => inner + pretty(x, inner)).join(",\n") + "\n" + indent + "]" : "[]";
            if (typeof v === "object") {
              const keys = Object.keys(v).sort();
              return keys.length ? "{\n" + keys.map((k) => inner + k + ": " + pretty(v[k], inner)).join(",\n") + "\n" + indent + "}" : "{}";
            }
            return String(v);
          }
          function notice(text) { $("notice").textContent = text; }

          // MARK: the list
          let loading = null;
          async function load() {
            const f = filter();
            const query = new URLSearchParams({ size: state.size, state: f.state, kind: f.kind });
            if (state.before !== null) query.set("before", state.before);
            const mine = (loading = Symbol());
            let reply;
            try {
              const response = await fetch("api/jobs?" + query, { credentials: "same-origin" });
              reply = await response.json();
              if (!response.ok) { notice(reply.error ? reply.error.message : "the list could not be read"); return; }
            } catch (e) { notice("the page's server is not answering: " + e); return; }
            if (mine !== loading) return;
            state.jobs = new Map(); state.order = [];
            for (const job of reply.jobs) { state.jobs.set(job.id, job); state.order.push(job.id); }
            state.counts = reply.counts || {};
            // Events up to this seq (some may still be on their way here) are in the counts already.
            state.countsSeq = reply.feed_seq;
            state.nextBefore = reply.next_before; state.more = reply.next_before !== null;
            if (state.olderWanted) { state.olderWanted = false; if (state.more) { older(); return; } }
            const kinds = $("kind");
            if (kinds.options.length === 1) for (const k of reply.kinds) kinds.appendChild(el("option", k));
            for (const id of [...state.selected]) if (!state.jobs.has(id)) state.selected.delete(id);
            state.dirty = true; draw(true);
          }
          let reloadTimer = null;
          function reloadSoon() { if (!reloadTimer) reloadTimer = setTimeout(() => { reloadTimer = null; load(); }, 100); }

          // MARK: drawing
          let lastDraw = 0, drawTimer = null;
          function draw(force) {
            if (state.paused && !force) return;
            const now = Date.now();
            if (!force && now - lastDraw < 100) {
              if (!drawTimer) drawTimer = setTimeout(() => { drawTimer = null; draw(); }, 100 - (now - lastDraw));
              return;
            }
            lastDraw = now; state.dirty = false;
            const counts = $("counts"); counts.replaceChildren();
            for (const s of unfinished) {
              const li = el("li", s + " "); li.dataset.state = s;
              li.appendChild(el("b", state.counts[s] || 0)); counts.appendChild(li);
            }
            const body = document.querySelector("#jobs tbody");
            const wanted = state.order.map((id) => row(state.jobs.get(id)));
            const shown = body.children;
            if (wanted.length !== shown.length || wanted.some((tr, i) => tr !== shown[i])) body.replaceChildren(...wanted);
            for (const id of [...rows.keys()]) if (!state.jobs.has(id)) rows.delete(id);
            $("pageno").textContent = "page " + state.page;
            $("prev").disabled = state.page === 1; $("next").disabled = !state.more;
            $("selected").textContent = state.selected.size + " selected";
            $("all").checked = state.order.length > 0 && state.order.every((id) => state.selected.has(id));
            if (state.detail) drawLog();
          }
          // A row is made once per job and updated in place, so a click is never lost to a redraw.
          const rows = new Map();
          function makeRow(id) {
            const r = { tr: el("tr"), cells: {} };
            r.tr.dataset.job = id;
            const box = el("input"); box.type = "checkbox";
            box.addEventListener("change", () => { box.checked ? state.selected.add(id) : state.selected.delete(id); draw(true); });
            const pick = el("td"); pick.appendChild(box); r.tr.appendChild(pick); r.box = box;
            const idCell = el("td"); const link = el("a", id.slice(0, 8), "job"); link.title = id;
            link.addEventListener("click", () => openDetail(id)); idCell.appendChild(link); r.tr.appendChild(idCell);
            for (const name of ["kind", "state", "progress", "rate", "eta", "current", "attempt", "host", "stop"]) {
              r.cells[name] = el("td", null, name === "current" ? "name" : name); r.tr.appendChild(r.cells[name]);
            }
            r.meter = el("progress"); r.meter.max = 1; r.amount = el("span");
            r.cells.progress.append(r.meter, r.amount);
            return r;
          }
          function row(job) {
            let r = rows.get(job.id);
            if (!r) { r = makeRow(job.id); rows.set(job.id, r); }
            const c = r.cells, p = job.progress || {};
            r.tr.dataset.state = job.state;
            r.box.checked = state.selected.has(job.id);
            c.kind.textContent = job.kind;
            c.state.textContent = job.state; c.state.className = "state state-" + job.state;
            r.meter.value = p.fraction || 0;
            r.amount.textContent = (p.total ? " " + amount(p.completed, p.unit) + " / " + amount(p.total, p.unit) : "")
              + (p.files_total ? " (" + p.files_completed + "/" + p.files_total + " files)" : "");
            c.rate.textContent = p.rate_per_s ? amount(Math.round(p.rate_per_s), p.unit) + "/s" : "";
            c.eta.textContent = job.state === "running" ? duration(p.eta_s) : "";
            c.current.textContent = p.phase ? phase(p.phase) : p.current || "";
            c.attempt.textContent = (job.attempt || 0) + "/" + (job.max_attempts || "?");
            c.host.textContent = state.hosts.get(job.id) || job.pinned_host || "";
            const stop = [];
            if (job.cancellation) stop.push(el("span", "stopped: " + job.cancellation.reason + (job.cancellation.detail ? " (" + job.cancellation.detail + ")" : "")));
            if (job.error) {
              stop.push(el("span", job.error.code + ": " + job.error.message));
              if (job.error.remedy) stop.push(el("span", job.error.remedy, "remedy"));
            }
            c.stop.replaceChildren(...stop);
            return r.tr;
          }

          // MARK: the detail
          async function openDetail(id) {
            state.detail = id;
            const reply = await (await fetch("api/job?id=" + encodeURIComponent(id), { credentials: "same-origin" })).json();
            if (!reply.job) { notice(reply.error ? reply.error.message : "no such job"); return; }
            const job = reply.job;
            $("detail").hidden = false; $("detail-id").textContent = job.id + " (" + job.state + ")";
            drawItems(job.progress);
            $("detail-params").textContent = pretty(job.params);
            $("detail-result").textContent = job.result === null ? "" : pretty(job.result);
            $("detail-error").textContent = job.error ? job.error.code + ": " + job.error.message + (job.error.remedy ? "\n" + job.error.remedy : "") : "";
            drawLog();
          }
          // The detail's files, one bar each: from `show`, then from each progress event of the job.
          function drawItems(progress) {
            const items = document.querySelector("#detail-items tbody"); items.replaceChildren();
            for (const item of (progress && progress.items) || []) {
              const tr = el("tr"); tr.appendChild(el("td", item.label, "name"));
              const td = el("td"); const m = el("progress"); m.max = item.total || 1; m.value = item.completed;
              td.appendChild(m); tr.appendChild(td);
              tr.appendChild(el("td", amount(item.completed, progress.unit) + " / " + amount(item.total, progress.unit)));
              items.appendChild(tr);
            }
          }
          function drawLog() {
            const list = $("detail-log"); list.replaceChildren();
            for (const line of state.logs.get(state.detail) || []) list.appendChild(el("li", line));
          }
          $("detail-close").addEventListener("click", () => { state.detail = null; $("detail").hidden = true; });

          // MARK: the feed
          function apply(event) {
            if (event.seq !== null && event.seq !== undefined) {
              if (state.lastSeq !== null && event.seq <= state.lastSeq && event.type !== "gap") return;
              state.lastSeq = event.seq;
            }
            if (event.type === "gap") { load(); return; }
            const id = event.job;
            if (event.host) state.hosts.set(id, event.host);
            const job = state.jobs.get(id);
            const counted = state.countsSeq === null || state.countsSeq === undefined || event.seq > state.countsSeq;
            switch (event.type) {
              case "submitted": {
                if (counted && !terminal.has(event.state)) state.counts[event.state] = (state.counts[event.state] || 0) + 1;
                const f = filter();
                const fits = (!f.kind || f.kind === event.kind) && (!f.state || f.state.split(",").includes(event.state));
                if (state.page === 1 && fits && !job) {
                  state.jobs.set(id, { id: id, kind: event.kind, state: event.state, attempt: 0, progress: {} });
                  state.order.unshift(id);
                  if (state.order.length > state.size) {
                    state.jobs.delete(state.order.pop());
                    // The next page starts below the row now last: its sequence if it was listed; a row made from
                    // an event has none until the reload, which "Older" waits for.
                    const last = state.jobs.get(state.order[state.order.length - 1]);
                    state.nextBefore = last && last.sequence !== undefined ? last.sequence : null;
                    state.more = true;
                  }
                  reloadSoon();
                }
                break;
              }
              case "state": {
                if (counted && event.from && !terminal.has(event.from)) state.counts[event.from] = Math.max(0, (state.counts[event.from] || 0) - 1);
                if (counted && event.to && !terminal.has(event.to)) state.counts[event.to] = (state.counts[event.to] || 0) + 1;
                if (job) {
                  job.state = event.to; job.attempt = event.attempt;
                  job.error = event.error || null; job.cancellation = event.cancellation || null;
                  if (event.result !== undefined) job.result = event.result;
                }
                if (state.detail === id) openDetail(id);
                break;
              }
              case "progress":
                if (job) job.progress = event.progress;
                if (state.detail === id && !state.paused) drawItems(event.progress);
                break;
              case "log": {
                const lines = state.logs.get(id) || [];
                lines.push(event.at + " " + event.level + " " + event.message);
                if (lines.length > 200) lines.shift();
                state.logs.set(id, lines);
                break;
              }
            }
            state.dirty = true; draw();
          }
          function listen() {
            const source = new EventSource("api/events");
            source.onmessage = (m) => apply(JSON.parse(m.data));
            source.addEventListener("daemon", (m) => {
              const status = JSON.parse(m.data), badge = $("daemon");
              badge.className = "daemon " + (status.up ? "up" : "down");
              badge.textContent = status.up ? "daemon running" : "daemon not reachable: " + status.message;
              if (status.up) load();
            });
            source.addEventListener("hello", () => { const b = $("daemon"); b.className = "daemon up"; b.textContent = "daemon running"; });
            source.onerror = () => {
              const b = $("daemon"); b.className = "daemon down";
              // CLOSED: the server refused the stream (a new `web` process, whose cookie this browser lacks).
              b.textContent = source.readyState === EventSource.CLOSED
                ? "the page's server refused the live stream: open the URL that 'trailbook-jobs web' printed"
                : "the page's server is not answering; retrying…";
            };
          }

          // MARK: actions
          async function act(verb, scope) {
            const body = { verb: verb };
            let what;
            if (scope === "match") {
              body.match = filter();
              what = "every unfinished job that matches the filter (" + (body.match.state || "any state") + ", " + (body.match.kind || "any kind") + ")";
            } else {
              body.jobs = [...state.selected];
              if (!body.jobs.length) { notice("select jobs first"); return; }
              what = body.jobs.length + " job" + (body.jobs.length === 1 ? "" : "s");
            }
            if (verb === "cancel" && !window.confirm("Cancel " + what + "? A cancelled job does not run again.")) return;
            let reply;
            try {
              const response = await fetch("api/action", {
                method: "POST", credentials: "same-origin",
                headers: { "Content-Type": "application/json", "X-Trailbook-Token": token }, body: JSON.stringify(body),
              });
              reply = await response.json();
              if (!response.ok) { notice(reply.error.message); return; }
            } catch (e) { notice("the page's server is not answering: " + e); return; }
            const failed = reply.failed.map((f) => f.job.slice(0, 8) + ": " + f.message);
            notice(verb + ": " + reply.done + " done" + (failed.length ? "; not done: " + failed.join("; ") : ""));
            state.selected.clear(); draw(true);
          }
          for (const button of document.querySelectorAll("button[data-verb]"))
            button.addEventListener("click", () => act(button.dataset.verb, button.dataset.scope));

          // MARK: controls
          function newest() { state.page = 1; state.before = null; state.newer = []; state.olderWanted = false; load(); }
          $("state").addEventListener("change", newest);
          $("kind").addEventListener("change", newest);
          $("prev").addEventListener("click", () => {
            if (state.page > 1) { state.page--; state.before = state.newer.pop(); state.olderWanted = false; load(); }
          });
          function older() {
            // Rows made from events have no cursor yet: this page is read again first, then the older one.
            if (state.nextBefore === null) { state.olderWanted = true; load(); return; }
            state.page++; state.newer.push(state.before); state.before = state.nextBefore; load();
          }
          $("next").addEventListener("click", () => { if (state.more) older(); });
          $("all").addEventListener("change", () => {
            for (const id of state.order) $("all").checked ? state.selected.add(id) : state.selected.delete(id);
            draw(true);
          });
          $("live").addEventListener("click", () => {
            state.paused = !state.paused;
            $("live").textContent = state.paused ? "Resume live updates" : "Pause live updates";
            $("live").setAttribute("aria-pressed", String(state.paused));
            if (!state.paused) draw(true);
          });

          listen();
          load();
        })();

        """#
}
