// limiterd dashboard: behaviour that needs no inline script. htmx does the
// polling and the form posts; this file adds the charts and small touches.
// Every time is UTC; the browser's local time shows on hover.
(function () {
  "use strict";
  // For the tests and the curious: the number formatter the charts use
  // (fmtNum) and the charts drawn (charts), set below.
  window.limiterd = { fmtNum: null, charts: null };
  // Confirm destructive buttons (data-confirm) before their form posts.
  document.addEventListener("submit", function (ev) {
    var btn = ev.submitter;
    var msg = btn && btn.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
    }
  }, true);

  // <time datetime> in UTC: the local time as its title.
  function localTimes(root) {
    var els = (root || document).querySelectorAll("time[datetime]");
    for (var i = 0; i < els.length; i++) {
      var d = new Date(els[i].getAttribute("datetime"));
      if (!isNaN(d)) {
        els[i].title = "your time: " + d.toLocaleString();
      }
    }
  }

  // The menu folds on narrow screens (its summary shows there).
  var narrow = window.matchMedia("(max-width: 720px)");
  function fitMenu() {
    var menu = document.getElementById("menu");
    if (menu) {
      menu.open = !narrow.matches;
    }
  }
  if (narrow.addEventListener) {
    narrow.addEventListener("change", fitMenu);
  }

  document.addEventListener("htmx:afterSwap", function (ev) {
    var target = ev.detail && ev.detail.target;
    localTimes(target);
    var el = document.getElementById("refreshed");
    if (el && target && target.id === "stats") {
      el.textContent = "updated " + utcClock(new Date());
    }
  });

  function utcClock(d) {
    return d.toISOString().slice(11, 19) + " UTC";
  }
  function utcDate(ts) {
    return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
  }
  // Time axis ticks in UTC, 24 h: seconds when the ticks are closer than
  // a minute.
  function timeTicks(u, splits, ax, space, incr) {
    return splits.map(function (ts) {
      var s = new Date(ts * 1e3).toISOString();
      return incr < 60 ? s.slice(11, 19) : s.slice(11, 16);
    });
  }
  // timeSpace is the least room between two time ticks, in CSS px: a
  // label "21:26:11" and a gap, so that no two labels ever overlap
  // whatever the stretch shown (uPlot picks the smallest increment that
  // leaves it).
  var timeSpace = 90;
  function timeValue(u, ts) {
    return ts == null ? "–" : new Date(ts * 1e3).toISOString().slice(0, 19).replace("T", " ");
  }
  // trimZeros drops the trailing zeros of a decimal fraction and its
  // point when nothing is left after it ("2.50" → "2.5", "1.00" → "1");
  // a whole number stays as it is ("100").
  function trimZeros(s) {
    return s.indexOf(".") < 0 ? s : s.replace(/0+$/, "").replace(/\.$/, "");
  }
  // group writes a whole number with a space between thousands: "30 000".
  function group(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, " ");
  }
  // fmtNum says v as the server's pages do (ui.number, one rule and one
  // table of tests for both): "–" for no value; below 10 up to two
  // decimals, below 100 one; whole numbers grouped by thousands to a
  // million; then three significant digits and a unit ("1.5 M").
  function fmtNum(v) {
    if (typeof v !== "number" || !isFinite(v)) {
      return "–";
    }
    var sign = v < 0 ? "-" : "";
    var a = Math.abs(v);
    var s;
    if (a < 9.995) {
      s = trimZeros(a.toFixed(2));
    } else if (a < 99.95) {
      s = trimZeros(a.toFixed(1));
    } else if (a < 999999.5) {
      s = group(Math.round(a));
    } else {
      var unit = a >= 999.5e6 ? " G" : " M";
      var x = a / (unit === " G" ? 1e9 : 1e6);
      s = trimZeros(x.toFixed(x >= 99.95 ? 0 : x >= 9.995 ? 1 : 2)) + unit;
    }
    return s === "0" ? s : sign + s;
  }
  window.limiterd.fmtNum = fmtNum;
  function fmt(v, unit) {
    var s = fmtNum(v);
    return s === "–" ? s : s + (unit || "");
  }
  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (res) {
        var type = res.headers.get("Content-Type") || "";
        if (!res.ok || type.indexOf("application/json") !== 0) {
          throw new Error("HTTP " + res.status);
        }
        return res.json();
      });
  }
  // legendAtEnd keeps a chart's legend on the newest values while the
  // cursor is not over it (uPlot shows "--" otherwise).
  function legendAtEnd(u) {
    if (u.cursor.idx == null && u.data[0].length > 0) {
      u.setLegend({ idx: u.data[0].length - 1 }, false);
    }
  }
  // scaleRange returns the y range for mode: linear from 0, clipped at
  // 1.2 × the 95th percentile of top, or logarithmic.
  function scaleRange(mode, top) {
    if (mode === "clip") {
      var s = top.filter(function (v) { return v > 0; }).sort(function (a, b) { return a - b; });
      var p = s.length ? s[Math.min(s.length - 1, Math.floor(s.length * 0.95))] : 1;
      return function () { return [0, Math.max(1, p * 1.2)]; };
    }
    return function (u, lo, hi) { return [0, Math.max(1, hi)]; };
  }
  function yScale(mode, top) {
    if (mode === "log") {
      return { distr: 3, log: 10 };
    }
    return { range: scaleRange(mode, top) };
  }
  function logSafe(mode, arr) {
    if (mode !== "log") {
      return arr;
    }
    return arr.map(function (v) { return v > 0 ? v : null; });
  }
  var palette = ["#b3261e", "#d9730d", "#7b3fb3", "#2456c7", "#1e7b34", "#8a6d00", "#00838f", "#c2185b", "#5d4037", "#455a64"];

  // The overview's charts of the last hour: the rejections of every group
  // stacked (#rejections-chart) and one group's requests by outcome and
  // its in-flight requests (#history-charts), in the scale chosen,
  // refreshed every 5 s. Once drawn they replace the table of totals.
  function initCharts() {
    var box = document.getElementById("history-charts");
    var rbox = document.getElementById("rejections-chart");
    if (!box || typeof uPlot !== "function") {
      return;
    }
    var base = box.getAttribute("data-history-url");
    var rurl = rbox && rbox.getAttribute("data-rejections-url");
    var select = document.getElementById("history-group");
    var scale = document.getElementById("history-scale");
    var status = document.getElementById("history-status");
    var controls = document.getElementById("history-controls");
    var table = document.getElementById("history-table");
    var charts = { rates: null, inflight: null, stack: null };
    // For the tests and the curious: the chart objects, their data,
    // scales and axes.
    window.limiterd.charts = charts;
    var stackKey = "";
    // stackGroups are the groups of the stacked chart's newest data: its
    // legend reads each group's own value there (the chart keeps its
    // options across setData, the data changes).
    var stackGroups = [];
    var rateSeries = [
      ["requests", "Requests", "#2456c7"],
      ["admitted", "Admitted", "#1e7b34"],
      ["rejected_concurrency", "Rejected: concurrency", "#b3261e"],
      ["rejected_rate_limit", "Rejected: rate limit", "#d9730d"],
      ["would_reject", "Would reject", "#7b3fb3"],
      ["denied", "Denied (403)", "#5d4037"]
    ];
    function width() {
      return Math.max(280, box.clientWidth);
    }
    function mode() {
      return scale ? scale.value : "linear";
    }
    function axes(unit) {
      return [
        { label: "time (UTC)", incrs: [1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600], values: timeTicks, space: timeSpace },
        { label: unit, size: 60, values: function (u, vals) { return vals.map(function (v) { return fmt(v); }); } }
      ];
    }
    function lineOpts(title, series, unit, height, top, m) {
      return {
        title: title,
        width: width(),
        height: height,
        tzDate: utcDate,
        scales: { y: yScale(m, top) },
        axes: axes(unit),
        hooks: { setLegend: [legendAtEnd], setData: [legendAtEnd] },
        series: [{ label: "Time (UTC)", value: timeValue }].concat(series.map(function (s) {
          return { label: s[1], stroke: s[2], width: 1.5, points: { show: false }, value: function (u, v) { return fmt(v, unit === "requests" ? "" : "/s"); } };
        }))
      };
    }
    function drawRates(j) {
      var top = j.requests;
      var data = [j.t].concat(rateSeries.map(function (s) { return logSafe(mode(), j[s[0]] || []); }));
      var flight = [j.t, j.inflight];
      if (!charts.rates) {
        var title = box.getAttribute("data-title") || "Requests of " + (select && select.value ? select.value : "all groups");
        charts.rates = new uPlot(lineOpts(title, rateSeries, "requests/s", 240, top, mode()), data, box);
        charts.inflight = new uPlot(lineOpts("In flight", [["inflight", "In flight", "#5b6475"]], "requests", 140, j.inflight, "linear"), flight, box);
        if (table) {
          table.hidden = true;
        }
      } else {
        charts.rates.setData(data);
        charts.inflight.setData(flight);
      }
      box.setAttribute("data-seconds", String(j.t.length));
      box.setAttribute("data-requests", String(j.requests.reduce(function (a, b) { return a + b; }, 0)));
    }
    // The stacked chart: series i is the sum of groups 0..i, drawn from
    // the largest down so that each band shows its group; the legend and
    // the hover show each group's own value.
    function drawStack(j) {
      var groups = j.groups || [];
      var key = groups.map(function (g) { return g.group; }).join(",") + "|" + mode();
      var sums = [];
      var acc = j.t.map(function () { return 0; });
      groups.forEach(function (g) {
        acc = acc.map(function (v, i) { return v + (g.rejected[i] || 0); });
        sums.push(acc.slice());
      });
      var order = groups.map(function (g, i) { return i; }).reverse();
      var data = [j.t].concat(order.map(function (i) { return logSafe(mode(), sums[i]); }));
      rbox.setAttribute("data-groups", groups.map(function (g) { return g.group; }).join(","));
      if (groups.length === 0) {
        if (charts.stack) {
          charts.stack.destroy();
          charts.stack = null;
        }
        rbox.textContent = "No rejections in the last hour.";
        stackKey = "";
        return;
      }
      stackGroups = groups;
      if (charts.stack && key === stackKey) {
        charts.stack.setData(data);
        return;
      }
      if (charts.stack) {
        charts.stack.destroy();
      }
      rbox.textContent = "";
      stackKey = key;
      var top = sums[sums.length - 1];
      charts.stack = new uPlot({
        title: "Rejections by group, stacked",
        width: width(),
        height: 240,
        tzDate: utcDate,
        scales: { y: yScale(mode(), top) },
        axes: axes("rejections/s"),
        hooks: { setLegend: [legendAtEnd], setData: [legendAtEnd] },
        series: [{ label: "Time (UTC)", value: timeValue }].concat(order.map(function (i) {
          var c = palette[i % palette.length];
          return {
            label: groups[i].group, stroke: c, fill: c + "55", width: 1, points: { show: false },
            value: function (u, v, si, di) {
              var g = stackGroups[i];
              return di == null || !g ? "–" : fmt(g.rejected[di] || 0, "/s");
            }
          };
        }))
      }, data, rbox);
    }
    function load() {
      // The overview's select chooses the group; a group's page fixes it
      // in its URL.
      var url = select ? base + (base.indexOf("?") < 0 ? "?" : "&") + "group=" + encodeURIComponent(select.value) : base;
      var jobs = [getJSON(url).then(drawRates)];
      if (rurl) {
        jobs.push(getJSON(rurl).then(drawStack));
      }
      Promise.all(jobs).then(function () {
        if (status) {
          status.textContent = "updated " + utcClock(new Date());
        }
      }).catch(function (err) {
        if (status) {
          status.textContent = "the charts could not be loaded (" + String(err.message || err) + ")";
        }
      });
    }
    function redraw() {
      ["rates", "inflight", "stack"].forEach(function (k) {
        if (charts[k]) {
          charts[k].destroy();
          charts[k] = null;
        }
      });
      stackKey = "";
      load();
    }
    if (controls) {
      controls.hidden = false;
    }
    if (select) {
      select.addEventListener("change", redraw);
    }
    if (scale) {
      scale.addEventListener("change", redraw);
    }
    window.addEventListener("resize", function () {
      if (charts.rates) {
        charts.rates.setSize({ width: width(), height: 240 });
        charts.inflight.setSize({ width: width(), height: 140 });
      }
      if (charts.stack) {
        charts.stack.setSize({ width: width(), height: 240 });
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
    var shown = {};
    window.limiterd.charts = shown;
    var countSeries = [
      ["requests", "Requests", "#2456c7"],
      ["rejected_concurrency", "Rejected: concurrency", "#b3261e"],
      ["rejected_rate_limit", "Rejected: rate limit", "#d9730d"]
    ];
    function width() {
      return Math.max(280, box.clientWidth);
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
    function opts(title, series, unit, height) {
      return {
        title: title,
        width: width(),
        height: height,
        tzDate: utcDate,
        scales: {
          x: { time: true, range: function () { return xr; } },
          y: { range: function (u, lo, hi) { return [0, Math.max(1, hi)]; } }
        },
        axes: [{ label: "time (UTC)", incrs: [10, 30, 60, 120, 300, 600, 900, 1800, 3600], values: timeTicks, space: timeSpace }, { label: unit, size: 60, values: function (u, vals) { return vals.map(function (v) { return fmt(v); }); } }],
        hooks: { setLegend: [legendAtEnd], setData: [legendAtEnd] },
        series: [{ label: "Time (UTC)", value: timeValue }].concat(series.map(function (s) {
          return { label: s[1], stroke: s[2], width: 1.5, points: { show: true, size: 4 }, value: function (u, v) { return fmt(v); } };
        }))
      };
    }
    function draw(j) {
      var data = [j.t].concat(countSeries.map(function (s) { return j[s[0]]; }));
      var flight = [j.t, j.inflight];
      span(j);
      if (!counts) {
        counts = new uPlot(opts("Per " + j.step + " s", countSeries, "requests per " + j.step + " s", 240), data, box);
        inflight = new uPlot(opts("In flight", [["inflight", "In flight", "#5b6475"]], "requests", 140), flight, box);
        shown.counts = counts;
        shown.inflight = inflight;
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
      getJSON(url)
        .then(function (j) {
          draw(j);
          // For tests and the curious: what the charts show.
          box.setAttribute("data-points", String(j.t.length));
          box.setAttribute("data-requests", String(sum(j.requests)));
          box.setAttribute("data-rejections", String(sum(j.rejected_concurrency) + sum(j.rejected_rate_limit)));
          if (status) {
            status.textContent = (j.t.length === 1 ? "1 point" : j.t.length + " points") + ", updated " + utcClock(new Date());
          }
        })
        .catch(function (err) {
          if (status) {
            status.textContent = "the chart could not be loaded (" + String(err.message || err) + ")";
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
    fitMenu();
    localTimes(document);
    initCharts();
    initPeerChart();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
