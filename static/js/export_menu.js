// The Export menu (templates/_partials/export_menu.html): its single-step links (PNG, and the
// step the offline HTML opens at) follow the player's current frame, as "Download SVG" does.
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
  // a click outside an open menu closes it
  document.addEventListener("click", function (event) {
    document.querySelectorAll("[data-export-menu][open]").forEach(function (menu) {
      if (!menu.contains(event.target)) menu.removeAttribute("open");
    });
  });
})();
