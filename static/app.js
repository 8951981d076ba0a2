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
  // Charts of the last hour (uPlot) from the JSON at data-history-url:
  // requests, admitted and rejections per second, and the in-flight
  // gauge, for the group chosen in #history-group; refreshed every 5 s.
  // Once drawn they replace the server-rendered table of totals.
  function initCharts() {
    var box = document.getElementById("history-charts");
    if (!box || typeof uPlot !== "function") {
      return;
    }
    var base = box.getAttribute("data-history-url");
    var select = document.getElementById("history-group");
    var status = document.getElementById("history-status");
    var controls = document.getElementById("history-controls");
    var table = document.getElementById("history-table");
    var rates = null;
    var inflight = null;
    var rateSeries = [
      ["requests", "Requests/s", "#2456c7"],
      ["admitted", "Admitted", "#1e7b34"],
      ["rejected_concurrency", "Rejected: concurrency", "#b3261e"],
      ["rejected_rate_limit", "Rejected: rate limit", "#d9730d"],
      ["would_reject", "Would reject", "#7b3fb3"]
    ];
    function width() {
      return Math.max(300, box.clientWidth);
    }
    function opts(title, series, height) {
      return {
        title: title,
        width: width(),
        height: height,
        scales: { y: { range: function (u, lo, hi) { return [0, Math.max(1, hi)]; } } },
        // Whole seconds on the time axis, never fractions.
        axes: [{ incrs: [1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600] }, {}],
        series: [{}].concat(series.map(function (s) {
          return { label: s[1], stroke: s[2], width: 1.5, points: { show: false } };
        }))
      };
    }
    function draw(j) {
      var data = [j.t].concat(rateSeries.map(function (s) { return j[s[0]]; }));
      var flight = [j.t, j.inflight];
      if (!rates) {
        rates = new uPlot(opts("Per second", rateSeries, 260), data, box);
        inflight = new uPlot(opts("In flight", [["inflight", "In flight", "#5b6475"]], 160), flight, box);
        if (table) {
          table.hidden = true;
        }
      } else {
        rates.setData(data);
        inflight.setData(flight);
      }
    }
    function load() {
      var url = base + (base.indexOf("?") < 0 ? "?" : "&") + "group=" + encodeURIComponent(select ? select.value : "");
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (res) {
          var type = res.headers.get("Content-Type") || "";
          if (!res.ok || type.indexOf("application/json") !== 0) {
            throw new Error("history: HTTP " + res.status);
          }
          return res.json();
        })
        .then(function (j) {
          draw(j);
          // For tests and the curious: what the charts show.
          box.setAttribute("data-seconds", String(j.t.length));
          box.setAttribute("data-requests", String(j.requests.reduce(function (a, b) { return a + b; }, 0)));
          if (status) {
            status.textContent = "updated " + new Date().toLocaleTimeString();
          }
        })
        .catch(function (err) {
          if (status) {
            status.textContent = String(err.message || err);
          }
        });
    }
    if (controls) {
      controls.hidden = false;
    }
    if (select) {
      select.addEventListener("change", load);
    }
    window.addEventListener("resize", function () {
      if (rates) {
        rates.setSize({ width: width(), height: 260 });
        inflight.setSize({ width: width(), height: 160 });
      }
    });
    load();
    window.setInterval(function () {
      if (!document.hidden) {
        load();
      }
    }, 5000);
  }
  // A peer's history (uPlot) from the JSON at data-peer-history-url: its
  // requests and rejections per 10 s and its in-flight requests over the
  // last hour; refreshed every 5 s (which also keeps the peer recorded
  // while its page is open). Once drawn the charts replace the table.
  function initPeerChart() {
    var box = document.getElementById("peer-history-charts");
    if (!box || typeof uPlot !== "function") {
      return;
    }
    var url = box.getAttribute("data-peer-history-url");
    var status = document.getElementById("peer-history-status");
    var table = document.getElementById("peer-history-table");
    var counts = null;
    var inflight = null;
    var countSeries = [
      ["requests", "Requests", "#2456c7"],
      ["rejected_concurrency", "Rejected: concurrency", "#b3261e"],
      ["rejected_rate_limit", "Rejected: rate limit", "#d9730d"]
    ];
    function width() {
      return Math.max(300, box.clientWidth);
    }
    // The time axis spans from the start of the recording (at most an
    // hour back) to the newest point, and at least 5 minutes, so that a
    // recording just started shows where its few points stand.
    var xr = [0, 1];
    function span(j) {
      var step = j.step || 10;
      var hi = (j.t.length ? j.t[j.t.length - 1] : Math.floor(Date.now() / 1000)) + step;
      var lo = Math.max(j.since || hi - 3600, hi - 3600);
      xr = [Math.min(lo, hi - 300), hi];
    }
    function opts(title, series, height) {
      return {
        title: title,
        width: width(),
        height: height,
        scales: {
          x: { time: true, range: function () { return xr; } },
          y: { range: function (u, lo, hi) { return [0, Math.max(1, hi)]; } }
        },
        axes: [{ incrs: [10, 30, 60, 120, 300, 600, 900, 1800, 3600] }, {}],
        series: [{}].concat(series.map(function (s) {
          return { label: s[1], stroke: s[2], width: 1.5, points: { show: true, size: 4 } };
        }))
      };
    }
    function draw(j) {
      var data = [j.t].concat(countSeries.map(function (s) { return j[s[0]]; }));
      var flight = [j.t, j.inflight];
      span(j);
      if (!counts) {
        counts = new uPlot(opts("Per " + j.step + " s", countSeries, 240), data, box);
        inflight = new uPlot(opts("In flight", [["inflight", "In flight", "#5b6475"]], 140), flight, box);
        if (table) {
          table.hidden = true;
        }
      } else {
        counts.setData(data);
        inflight.setData(flight);
      }
    }
    function sum(a) {
      return a.reduce(function (x, y) { return x + y; }, 0);
    }
    function load() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (res) {
          var type = res.headers.get("Content-Type") || "";
          if (!res.ok || type.indexOf("application/json") !== 0) {
            throw new Error("peer history: HTTP " + res.status);
          }
          return res.json();
        })
        .then(function (j) {
          draw(j);
          // For tests and the curious: what the charts show.
          box.setAttribute("data-points", String(j.t.length));
          box.setAttribute("data-requests", String(sum(j.requests)));
          box.setAttribute("data-rejections", String(sum(j.rejected_concurrency) + sum(j.rejected_rate_limit)));
          if (status) {
            status.textContent = (j.t.length === 1 ? "1 point" : j.t.length + " points") + ", updated " + new Date().toLocaleTimeString();
          }
        })
        .catch(function (err) {
          if (status) {
            status.textContent = String(err.message || err);
          }
        });
    }
    window.addEventListener("resize", function () {
      if (counts) {
        counts.setSize({ width: width(), height: 240 });
        inflight.setSize({ width: width(), height: 140 });
      }
    });
    load();
    window.setInterval(function () {
      if (!document.hidden) {
        load();
      }
    }, 5000);
  }
  function init() {
    initCharts();
    initPeerChart();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
