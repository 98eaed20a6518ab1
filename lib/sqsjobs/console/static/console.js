// sqsjobs console: refresh the regions marked data-refresh without a full reload.
// Every few seconds the page's own URL (or the region's data-refresh URL) is
// fetched, parsed off-document, and each region's content is replaced by the
// fresh copy with the same id. The window's scroll position and open <details>
// are kept; nothing is refreshed while the reader types in a field.
(function () {
  "use strict";
  var seconds = Number(document.body.dataset.refreshSeconds || 0);
  if (!(seconds > 0) || !window.fetch || !window.DOMParser) { return; }
  var busy = false;

  function typing() {
    var el = document.activeElement;
    return el && /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName);
  }

  function swap(region, fresh) {
    var open = Array.prototype.map.call(region.querySelectorAll("details[open][id]"), function (d) { return d.id; });
    var x = window.scrollX, y = window.scrollY;
    region.replaceChildren.apply(region, Array.prototype.slice.call(fresh.childNodes));
    open.forEach(function (id) { var d = document.getElementById(id); if (d) { d.open = true; } });
    window.scrollTo(x, y);
  }

  function refresh() {
    if (busy || document.hidden || typing()) { return; }
    var regions = Array.prototype.slice.call(document.querySelectorAll("[data-refresh][id]"));
    var urls = [];
    regions.forEach(function (r) { if (urls.indexOf(r.dataset.refresh) < 0) { urls.push(r.dataset.refresh); } });
    if (!urls.length) { return; }
    busy = true;
    Promise.all(urls.map(function (url) {
      return fetch(url, { credentials: "same-origin", headers: { "X-Console-Refresh": "1" } })
        .then(function (response) { if (!response.ok) { throw new Error(String(response.status)); } return response.text(); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          regions.forEach(function (region) {
            if (region.dataset.refresh !== url) { return; }
            var fresh = doc.getElementById(region.id);
            if (fresh) { swap(region, fresh); }
          });
        });
    })).then(function () {
      document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
      document.body.classList.remove("stale");
    }, function () {
      document.body.classList.add("stale");
    }).then(function () { busy = false; });
  }

  window.setInterval(refresh, seconds * 1000);
})();
