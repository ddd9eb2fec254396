/// The page itself: its HTML, with the script and the style served as files of their own (`WebPageScript`,
/// `WebPageStyle`) so the Content-Security-Policy can forbid every inline script and style. Compiled into the
/// binary: there is no build step and nothing is fetched from another site.
enum WebPage {
    /// The page, carrying the action token and the read-only flag in `<meta>` elements (the script reads them;
    /// both are hex or a word, with nothing to escape).
    static func html(actionToken: String, readOnly: Bool) -> String {
        #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="trailbook-token" content="\#(actionToken)">
        <meta name="trailbook-read-only" content="\#(readOnly)">
        <title>trailbook-jobs</title>
        <link rel="stylesheet" href="app.css">
        <script src="app.js" defer></script>
        </head>
        <body>
        <header>
          <h1>trailbook-jobs</h1>
          <span id="daemon" class="daemon up">connecting…</span>
          <ul id="counts"></ul>
        </header>
        <section id="controls">
          <label>State <select id="state">
            <option value="">all</option>
            <option value="queued,running,paused,needs_retry">unfinished</option>
            <option>queued</option><option>running</option><option>paused</option><option>needs_retry</option>
            <option>succeeded</option><option>failed</option><option>cancelled</option>
          </select></label>
          <label>Kind <select id="kind"><option value="">all</option></select></label>
          <button id="live" type="button" aria-pressed="false">Pause live updates</button>
          <span class="actions">
            <span id="selected">0 selected</span>
            <button type="button" data-verb="pause" data-scope="selection">Pause</button>
            <button type="button" data-verb="resume" data-scope="selection">Resume</button>
            <button type="button" data-verb="cancel" data-scope="selection" class="danger">Cancel</button>
            <span class="all">All that match:
              <button type="button" data-verb="pause" data-scope="match">Pause</button>
              <button type="button" data-verb="resume" data-scope="match">Resume</button>
              <button type="button" data-verb="cancel" data-scope="match" class="danger">Cancel</button>
            </span>
          </span>
          <span id="readonly" hidden>read-only</span>
        </section>
        <p id="notice" role="status"></p>
        <table id="jobs">
          <thead><tr>
            <th><input type="checkbox" id="all" aria-label="select every job on this page"></th>
            <th>Job</th><th>Kind</th><th>State</th><th>Progress</th><th>Rate</th><th>ETA</th><th>Current</th>
            <th>Attempt</th><th>Host</th><th>Stop / error</th>
          </tr></thead>
          <tbody></tbody>
        </table>
        <nav id="pages">
          <button id="prev" type="button">Newer</button> <span id="pageno">page 1</span>
          <button id="next" type="button">Older</button>
        </nav>
        <section id="detail" hidden>
          <h2>Job <span id="detail-id"></span> <button id="detail-close" type="button">Close</button></h2>
          <h3>Files</h3><table id="detail-items"><tbody></tbody></table>
          <h3>Params</h3><pre id="detail-params"></pre>
          <h3>Result</h3><pre id="detail-result"></pre>
          <h3>Error</h3><pre id="detail-error"></pre>
          <h3>Log</h3><ol id="detail-log"></ol>
        </section>
        </body>
        </html>

        """#
    }

    /// The style sheet.
    static let style = #"""
        body { font: 14px system-ui, sans-serif; margin: 0 1em; color: #222; }
        header { display: flex; align-items: baseline; gap: 1em; flex-wrap: wrap; }
        h1 { font-size: 1.3em; }
        #counts { display: flex; gap: 1em; list-style: none; padding: 0; }
        #counts li b { font-variant-numeric: tabular-nums; }
        .daemon.up { color: #2a7; }
        .daemon.down { color: #fff; background: #c33; padding: 0.2em 0.5em; border-radius: 3px; }
        #controls { display: flex; gap: 1em; align-items: center; flex-wrap: wrap; margin-bottom: 0.5em; }
        .actions { display: inline-flex; gap: 0.4em; align-items: center; }
        .all { margin-left: 1em; }
        body.read-only .actions, body.read-only th:first-child, body.read-only td:first-child { display: none; }
        button.danger { color: #a11; }
        #notice { min-height: 1.2em; margin: 0.2em 0; }
        table#jobs { border-collapse: collapse; width: 100%; }
        #jobs th, #jobs td { text-align: left; padding: 0.25em 0.5em; border-bottom: 1px solid #ddd; vertical-align: top; }
        #jobs td.name, #jobs td.stop { max-width: 24em; overflow-wrap: anywhere; }
        #jobs progress { width: 10em; }
        #jobs td.progress, #jobs td.rate, #jobs td.eta { white-space: nowrap; }
        #jobs td.name { min-width: 12em; }
        .state-running { color: #16a; } .state-succeeded { color: #2a7; } .state-failed { color: #c33; }
        .state-cancelled { color: #777; } .state-paused { color: #a70; } .state-needs_retry { color: #a70; }
        .remedy { color: #555; font-size: 0.9em; display: block; }
        a.job { font-family: ui-monospace, monospace; cursor: pointer; color: #16a; text-decoration: underline; }
        #detail { border-top: 2px solid #888; margin-top: 1em; }
        #detail pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6; padding: 0.5em; }
        #readonly { color: #a70; font-weight: bold; }

        """#
}
