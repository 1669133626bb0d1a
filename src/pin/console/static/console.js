// The console's only script: refreshes the page's content every data-refresh seconds while nobody is filling in a
// form on it. Pages read the same without it (server-rendered HTML). No inline script anywhere: the
// Content-Security-Policy allows this file only.
(function () {
  "use strict";
  var seconds = Number(document.body.getAttribute("data-refresh"));
  if (!seconds || !window.fetch || !window.DOMParser) { return; }

  function busy() {
    var active = document.activeElement;
    if (active && /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(active.tagName)) { return true; }
    // a letter ticked for an action, or text typed into a field, must not be wiped by a refresh
    var fields = document.querySelectorAll("main input, main textarea");
    for (var i = 0; i < fields.length; i++) {
      var field = fields[i];
      if ((field.type === "checkbox" && field.checked) || (field.type !== "hidden" && field.type !== "checkbox" && field.value !== field.defaultValue)) { return true; }
    }
    return false;
  }

  function swap(fresh, id) {
    var now = document.getElementById(id);
    var next = fresh.getElementById(id);
    if (now && next) { now.replaceWith(document.importNode(next, true)); }
    else if (now && !next) { now.remove(); }
    else if (!now && next) { document.querySelector("main").before(document.importNode(next, true)); }
  }

  function refresh() {
    if (busy() || document.hidden) { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null || busy()) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        swap(fresh, "paused");
        swap(fresh, "main");
      })
      .catch(function () { /* the next tick tries again */ });
  }

  window.setInterval(refresh, seconds * 1000);
})();
