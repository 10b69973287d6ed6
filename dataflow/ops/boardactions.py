"""The actions of the live board (``utility serve --write-token-file``): a panel under the
grid where an operator pastes a write token, picks a chunk by clicking its cell, and
resubmits it (with its downstream, if asked), holds, releases it, or recovers its job's
dead runs. Never in the static page (``utility board --html``): it acts on nothing.

Each action takes two clicks: the first asks the server what would change (a dry run,
refused as the action would be: a read token's, a live chunk's) and shows it; only
"Confirm" posts the action. The token is kept in the tab's ``sessionStorage`` (gone when
the tab closes; never a cookie) and sent as ``Authorization: Bearer``, with a JSON body.
Every text the server sends back is set as text, never parsed as HTML.
"""

from __future__ import annotations

STYLE = """
#acts { border: 1px solid #ccc; padding: 6px 8px; margin: 8px 0; max-width: 60em; }
#acts button { margin: 2px 4px 2px 0; }
#act-changes { margin: 4px 0; padding-left: 20px; }
#act-result.refused { color: #b00; }
td.cell.picked { outline: 3px solid #000; }
"""

PANEL = """<div id="acts"><strong>Actions</strong>
<label>write token <input id="act-token" type="password" autocomplete="off" spellcheck="false" size="30"></label>
<p class="note" id="act-chunk">Click a cell to choose its chunk.</p>
<div id="act-buttons">
<button type="button" data-act="resubmit">Resubmit</button>
<label><input id="act-cascade" type="checkbox"> with its downstream (--cascade)</label>
<button type="button" data-act="hold">Hold</button>
<button type="button" data-act="release">Release</button>
<button type="button" data-act="recover">Recover the job's dead runs</button>
</div>
<div id="act-confirm" hidden><p id="act-preview"></p><ul id="act-changes"></ul>
<button type="button" id="act-yes">Confirm</button>
<button type="button" id="act-no">Cancel</button></div>
<p id="act-result" role="status"></p></div>
"""

SCRIPT = """
(function () {
  var KEY = 'dataflow-write-token';
  var token = document.getElementById('act-token');
  var chunk = document.getElementById('act-chunk');
  var confirm = document.getElementById('act-confirm');
  var result = document.getElementById('act-result');
  var picked = null, pending = null;
  token.value = sessionStorage.getItem(KEY) || '';
  token.addEventListener('input', function () { sessionStorage.setItem(KEY, token.value.trim()); });
  function say(text, refused) {
    result.textContent = text;
    result.className = refused ? 'refused' : '';
  }
  function mark() {
    document.querySelectorAll('td.cell.picked').forEach(function (td) { td.classList.remove('picked'); });
    if (!picked) { return; }
    document.querySelectorAll('tbody tr').forEach(function (tr) {
      if (tr.dataset.job !== picked.job) { return; }
      var heads = document.querySelectorAll('thead th');
      tr.querySelectorAll('td.cell').forEach(function (td, i) {
        if (heads[i + 1] && heads[i + 1].textContent === picked.dataid) { td.classList.add('picked'); }
      });
    });
  }
  document.addEventListener('click', function (event) {
    var td = event.target.closest && event.target.closest('td.cell');
    if (!td) { return; }
    var head = document.querySelectorAll('thead th')[td.cellIndex];
    picked = {job: td.parentElement.dataset.job, dataid: head.textContent,
              status: td.dataset.status || 'no chunk'};
    chunk.textContent = picked.job + ' at ' + picked.dataid + ' (' + picked.status + ')';
    confirm.hidden = true;
    pending = null;
    say('', false);
    mark();
  });
  document.addEventListener('board-updated', mark);
  function post(name, body) {
    return fetch('api/actions/' + name, {
      method: 'POST', cache: 'no-store', credentials: 'omit',
      headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token.value.trim()},
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.text().then(function (text) {
        var value = null;
        try { value = JSON.parse(text); } catch (e) { value = null; }
        if (!r.ok) { throw new Error((value && value.error) || ('HTTP ' + r.status)); }
        return value;
      });
    });
  }
  function lines(list, changes) {
    list.textContent = '';
    changes.forEach(function (c) {
      var li = document.createElement('li');
      li.textContent = c.jobid + ' ' + c.dataid + ': ' + c.before + ' -> ' + c.after +
        (c.note ? ' (' + c.note + ')' : '');
      list.appendChild(li);
    });
  }
  document.getElementById('act-buttons').addEventListener('click', function (event) {
    var name = event.target.dataset && event.target.dataset.act;
    if (!name) { return; }
    if (!picked) { say('Click a cell first: it chooses the chunk.', true); return; }
    var body = {job: picked.job};
    if (name !== 'recover') { body.dataid = picked.dataid; }
    if (name === 'resubmit') { body.cascade = document.getElementById('act-cascade').checked; }
    confirm.hidden = true;
    say('asking the server what ' + name + ' would change...', false);
    post(name, Object.assign({dry_run: true}, body)).then(function (answer) {
      pending = {name: name, body: body};
      document.getElementById('act-preview').textContent =
        name + (body.cascade ? ' --cascade' : '') + ' ' + picked.job +
        (body.dataid ? ' ' + body.dataid : '') + ' as ' + answer.who + ': ' + answer.summary +
        (answer.changes.length ? ':' : '.');
      lines(document.getElementById('act-changes'), answer.changes);
      confirm.hidden = false;
      say('', false);
    }).catch(function (e) { say('refused: ' + e.message, true); });
  });
  document.getElementById('act-no').addEventListener('click', function () {
    confirm.hidden = true;
    pending = null;
    say('cancelled: nothing changed', false);
  });
  document.getElementById('act-yes').addEventListener('click', function () {
    if (!pending) { return; }
    var asked = pending;
    pending = null;
    confirm.hidden = true;
    post(asked.name, asked.body).then(function (answer) {
      say(asked.name + ' done as ' + answer.who + ': ' + answer.summary, false);
    }).catch(function (e) { say('refused: ' + e.message, true); });
  });
})();
"""


def panel() -> str:
    """The panel and its script, for the body of a live board."""
    return f"<style>{STYLE}</style>\n{PANEL}<script>{SCRIPT}</script>\n"
