// Later frames of the /pipeline and /tensor-parallel decks arrive as empty layers that carry
// their content as text, <g class="frame" data-frame="k" data-markup='…'></g>, in the deck's
// inert <template class="deck-later"> (app/views/pipeline_svg.py, tp_svg.py): parsing an
// attribute costs the browser next to nothing when a slider swaps the stage, parsing the
// elements a few microseconds each. When the player shows frame k, every layer up to k gets its
// elements at once (before the frame is painted) and so does layer k + 1, so that stepping
// forward finds it ready and animates it — a quarter of a second later when the player has
// just started on a new stage.
(function () {
  "use strict";

  function fill(root, upto) {
    var later = root.querySelector("template.deck-later");
    var shells = Array.prototype.slice.call(root.querySelectorAll("svg.deck g.frame[data-markup]"));
    if (later) shells = shells.concat(Array.prototype.slice.call(later.content.querySelectorAll("g.frame[data-markup]")));
    shells.forEach(function (g) {
      if (parseInt(g.dataset.frame, 10) > upto) return;
      var markup = g.getAttribute("data-markup");
      g.removeAttribute("data-markup");
      g.insertAdjacentHTML("afterbegin", markup);
    });
  }

  document.addEventListener("player:frame", function (event) {
    var root = event.target, k = event.detail.frame;
    if (!root.querySelector || !root.querySelector("g.frame[data-markup], template.deck-later")) return;
    fill(root, k);
    if (root.__lazyStepped) { fill(root, k + 1); return; }   // stepping: the next layer now
    // the player has just started (a new stage): the next layer a quarter of a second later,
    // since while a slider is being dragged each stage is replaced within moments
    root.__lazyStepped = true;
    window.setTimeout(function () { if (document.contains(root)) fill(root, k + 1); }, 250);
  });
})();
