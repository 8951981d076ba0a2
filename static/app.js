// limiterd dashboard: behaviour that needs no inline script. htmx does the
// polling and the form posts; this file only adds small touches.
(function () {
  "use strict";
  // Confirm destructive buttons (data-confirm) before their form posts.
  document.addEventListener("submit", function (ev) {
    var btn = ev.submitter;
    var msg = btn && btn.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
    }
  }, true);
  // Mark the time of the last live refresh.
  document.addEventListener("htmx:afterSwap", function (ev) {
    var el = document.getElementById("refreshed");
    if (el && ev.detail && ev.detail.target && ev.detail.target.id === "stats") {
      el.textContent = "updated " + new Date().toLocaleTimeString();
    }
  });
})();
