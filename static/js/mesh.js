// The /parallelism deck and page: hovering (or focusing) a rank lights up its groups — the
// cells of its tp, cp, ep, dp and pp groups show that axis's strip, and the cells of its group
// on the current frame's axis are outlined — and the first DDP script steps one step at a time.
// Cells are <g class="mrank" data-rank="r" data-groups="tp3 cp5 …"> (app/scenes/parallelism/
// deck_svg.py); the listeners sit on the document, so decks swapped in by htmx need nothing.
(function () {
  "use strict";
  var KINDS = ["tp", "cp", "ep", "dp", "pp"];

  function groupsOf(cell) {
    var out = {};
    cell.getAttribute("data-groups").split(" ").forEach(function (item) {
      var m = /^([a-z_]+?)(\d+)$/.exec(item);
      if (m) out[m[1]] = m[2];
    });
    return out;
  }

  function clear(deck) {
    deck.querySelectorAll(".mrank.hovered, .mrank.hl-axis, .mrank[class*='hl-']").forEach(function (c) {
      c.classList.remove("hovered", "hl-axis");
      KINDS.forEach(function (k) { c.classList.remove("hl-" + k); });
    });
  }

  function highlight(cell) {
    var deck = cell.closest("svg.deck");
    if (!deck) return;
    clear(deck);
    var mine = groupsOf(cell);
    var current = deck.querySelector("g.frame.current");
    var axis = current ? current.getAttribute("data-axis") : "";
    deck.querySelectorAll(".mrank").forEach(function (other) {
      var theirs = groupsOf(other);
      KINDS.forEach(function (k) { if (theirs[k] === mine[k]) other.classList.add("hl-" + k); });
      if (axis && theirs[axis] === mine[axis]) other.classList.add("hl-axis");
    });
    cell.classList.add("hovered");
  }

  document.addEventListener("pointerover", function (event) {
    var cell = event.target.closest && event.target.closest("svg.deck .mrank");
    if (cell) highlight(cell);
  });
  document.addEventListener("pointerout", function (event) {
    var cell = event.target.closest && event.target.closest("svg.deck .mrank");
    if (cell && !cell.contains(event.relatedTarget)) clear(cell.closest("svg.deck"));
  });

  // -- the DDP script, one step at a time (without JavaScript every step shows) ---------------
  function stepper(list) {
    if (list.__stepper) return;
    list.__stepper = true;
    var steps = Array.prototype.slice.call(list.querySelectorAll(".ddp-step"));
    if (!steps.length) return;
    var k = 0;
    var nav = document.createElement("div");
    nav.className = "ddp-nav";
    nav.innerHTML = '<button type="button" class="button" data-ddp="prev">◀ previous</button>' +
      '<span data-ddp-position></span>' +
      '<button type="button" class="button" data-ddp="next">next ▶</button>' +
      '<button type="button" class="button" data-ddp="all">show all</button>';
    list.parentNode.insertBefore(nav, list);
    var position = nav.querySelector("[data-ddp-position]");
    function show(i) {
      k = Math.max(0, Math.min(steps.length - 1, i));
      steps.forEach(function (s, j) { s.classList.toggle("shown", j === k); });
      position.textContent = "step " + (k + 1) + " of " + steps.length;
    }
    nav.addEventListener("click", function (event) {
      var button = event.target.closest("[data-ddp]");
      if (!button) return;
      var what = button.getAttribute("data-ddp");
      if (what === "all") { list.classList.toggle("stepping"); return; }
      list.classList.add("stepping");
      show(k + (what === "next" ? 1 : -1));
    });
    list.classList.add("stepping");
    show(0);
  }

  function init(scope) {
    (scope || document).querySelectorAll("[data-stepper]").forEach(stepper);
  }
  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:load", function (event) { init(event.detail.elt); });
})();
