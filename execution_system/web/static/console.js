// Live updates for the console: follow /api/v1/events and reload when something changed.
// Served as a file (no inline script), so the page's Content-Security-Policy stays strict.
"use strict";
(function () {
  var live = document.body.getAttribute("data-live");
  if (!live || typeof EventSource === "undefined") { return; }
  var url = "/api/v1/events" + (live === "list" ? "" : "?delivery=" + encodeURIComponent(live));
  var source = new EventSource(url);
  var pending = false;
  // A submitted form is already navigating: a reload now would cancel its post.
  document.addEventListener("submit", function () { pending = true; source.close(); });
  function busy() {
    var active = document.activeElement;
    return active && (active.tagName === "TEXTAREA" || active.tagName === "INPUT" || active.tagName === "SELECT");
  }
  source.addEventListener("status", function () {
    if (pending) { return; }
    pending = true;
    if (busy()) {
      document.getElementById("live-note").hidden = false;
      return;
    }
    window.setTimeout(function () { window.location.reload(); }, 200);
  });
})();
