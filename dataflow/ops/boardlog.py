"""The log of a chunk's last run, on the live board (``utility serve``): click a cell, then
"Show its log"; "follow" reads it again every refresh of the board while the box is
ticked. It reads ``/api/log``, which serves the run's log of any host (its file on the
server's host, else the store's copy). Never in the static page (``utility board --html``):
a file has no server to ask. The log is set as text, never parsed as HTML.
"""

from __future__ import annotations

STYLE = """
#log { border: 1px solid #ccc; padding: 6px 8px; margin: 8px 0; max-width: 60em; }
#log-text { max-height: 24em; overflow: auto; background: #f7f7f7; padding: 4px; }
"""

PANEL = """<div id="log"><strong>Log</strong>
<button type="button" id="log-show">Show its last run's log</button>
<label><input id="log-follow" type="checkbox"> follow</label>
<p class="note" id="log-chunk" role="status">Click a cell to choose its chunk.</p>
<pre id="log-text" hidden></pre></div>
"""

SCRIPT = """
(function () {
  var every = Number(document.body.dataset.live) * 1000;
  var which = document.getElementById('log-chunk'), text = document.getElementById('log-text');
  var follow = document.getElementById('log-follow');
  var picked = null, timer = null;
  document.addEventListener('click', function (event) {
    var td = event.target.closest && event.target.closest('td.cell');
    if (!td) { return; }
    var head = document.querySelectorAll('thead th')[td.cellIndex];
    picked = {job: td.parentElement.dataset.job, dataid: head.textContent};
    which.textContent = picked.job + ' at ' + picked.dataid;
  });
  function show() {
    if (!picked) { which.textContent = 'Click a cell first: it chooses the chunk.'; return; }
    var asked = picked;
    var url = 'api/log/' + encodeURIComponent(asked.job) + '/' + encodeURIComponent(asked.dataid);
    fetch(url, {cache: 'no-store', credentials: 'same-origin'})
      .then(function (r) {
        return r.text().then(function (body) {
          if (r.ok) { return body; }
          var value = null;
          try { value = JSON.parse(body); } catch (e) { value = null; }
          throw new Error((value && value.error) || ('HTTP ' + r.status));
        });
      })
      .then(function (body) {
        var atEnd = text.scrollTop + text.clientHeight >= text.scrollHeight - 2;
        text.textContent = body;
        text.hidden = false;
        if (atEnd) { text.scrollTop = text.scrollHeight; }
        which.textContent = asked.job + ' at ' + asked.dataid + ": its last run's log, read " +
          new Date().toLocaleTimeString();
      })
      .catch(function (e) { text.hidden = true; which.textContent = 'no log: ' + e.message; });
  }
  function again() {
    clearInterval(timer);
    if (follow.checked) { timer = setInterval(show, every); }
  }
  document.getElementById('log-show').addEventListener('click', function () { show(); again(); });
  follow.addEventListener('change', again);
})();
"""


def panel() -> str:
    """The panel and its script, for the body of a live board."""
    return f"<style>{STYLE}</style>\n{PANEL}<script>{SCRIPT}</script>\n"
