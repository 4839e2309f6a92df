// The Export menu (templates/_partials/export_menu.html): its single-step links (PNG, and the
// step the offline HTML opens at) follow the player's current frame, as "Download SVG" does;
// the steps chosen (shown from 1; first and last in the URL count frames from 0, as frame
// does) go into the animation's, the PDF's and the slides' links, the width into the pictures'.
// A first step after the last is refused: the message says so and those links are disabled.
(function () {
  "use strict";
  document.addEventListener("player:frame", function (event) {
    var root = event.target.closest ? event.target.closest("[data-player]") : null;
    var scope = root || document;
    var frame = "frame=" + event.detail.frame;
    scope.querySelectorAll("[data-export-frame]").forEach(function (link) {
      var href = link.getAttribute("href");
      // a new stage's links are on its first frame already: nothing to write at each move
      if ((href.match(/[?&](frame=\d+)/) || [])[1] === frame) return;
      var url = new URL(href, window.location.href);
      url.searchParams.set("frame", String(event.detail.frame));
      link.setAttribute("href", url.pathname + url.search);
    });
  });

  function set(link, name, value) {
    var url = new URL(link.getAttribute("href"), window.location.href);
    if (value === null || value === "") url.searchParams.delete(name); else url.searchParams.set(name, value);
    link.setAttribute("href", url.pathname + url.search);
  }

  function choose(range) {
    var menu = range.closest("[data-export-menu]");
    var steps = parseInt(range.dataset.frames, 10);
    var first = range.querySelector("[data-export-first]"), last = range.querySelector("[data-export-last]");
    var a = first.value === "" ? 1 : Number(first.value), b = last.value === "" ? steps : Number(last.value);
    var error = range.querySelector("[data-export-error]");
    var whole = function (x) { return Number.isInteger(x) && x >= 1 && x <= steps; };
    var problem = !whole(a) ? "The first step must be from 1 to " + steps + " (got " + first.value + ")."
      : !whole(b) ? "The last step must be from 1 to " + steps + " (got " + last.value + ")."
      : a > b ? "The first step (" + a + ") is after the last (" + b + "): choose a first step at or before the last."
      : "";
    first.toggleAttribute("aria-invalid", problem !== "" && (!whole(a) || a > b));
    last.toggleAttribute("aria-invalid", problem !== "" && whole(a) && !whole(b));
    error.textContent = problem;
    error.hidden = !problem;
    menu.querySelectorAll("[data-export-ranged]").forEach(function (link) {
      if (problem) { link.setAttribute("aria-disabled", "true"); return; }
      link.removeAttribute("aria-disabled");
      set(link, "first", a > 1 ? String(a - 1) : null);
      set(link, "last", b < steps ? String(b - 1) : null);
    });
    var width = range.querySelector("[data-export-width]").value;
    menu.querySelectorAll("[data-export-sized]").forEach(function (link) { set(link, "width", width); });
  }

  ["input", "change"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var range = event.target.closest && event.target.closest("[data-export-range]");
      if (range) choose(range);
    });
  });
  document.addEventListener("click", function (event) {
    // a refused range's links do nothing
    var disabled = event.target.closest && event.target.closest('[data-export-menu] a[aria-disabled="true"]');
    if (disabled) { event.preventDefault(); return; }
    // a click outside an open menu closes it
    document.querySelectorAll("[data-export-menu][open]").forEach(function (menu) {
      if (!menu.contains(event.target)) menu.removeAttribute("open");
    });
  });
})();
