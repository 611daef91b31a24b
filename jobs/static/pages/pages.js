// Live parts of the pages: [data-refresh] swaps in a fragment every few seconds (the overview);
// [data-tail] polls a run's JSON and swaps in its live part until the run is finished.
(function () {
  "use strict";

  function fetchOk(url) {
    return fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } }).then(function (r) {
      if (!r.ok || r.redirected) throw new Error("stopped: " + r.status);
      return r;
    });
  }

  function refresh(el) {
    var every = parseInt(el.dataset.interval, 10) || 5000;
    var timer = setInterval(function () {
      if (document.hidden) return;
      fetchOk(el.dataset.refresh).then(function (r) { return r.text(); })
        .then(function (html) { el.innerHTML = html; })
        .catch(function () { clearInterval(timer); });
    }, every);
  }

  function tail(el) {
    var every = parseInt(el.dataset.interval, 10) || 2000;
    function poll() {
      fetchOk(el.dataset.tail).then(function (r) { return r.json(); }).then(function (data) {
        var old = el.querySelector("#output");
        var atBottom = !old || old.scrollTop + old.clientHeight >= old.scrollHeight - 8;
        el.innerHTML = data.html;
        var out = el.querySelector("#output");
        if (out && atBottom) out.scrollTop = out.scrollHeight;
        el.dataset.status = data.status;
        if (!data.terminal) setTimeout(poll, every);
      }).catch(function () { setTimeout(poll, every * 5); });
    }
    setTimeout(poll, every);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-refresh]").forEach(refresh);
    document.querySelectorAll("[data-tail]").forEach(tail);
  });
})();
