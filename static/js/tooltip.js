// Hover tooltips for anything with data-tip (cells of a deck, numbers with their formula).
// One floating element for the page; no title elements, so large decks stay light.
(function () {
  "use strict";
  var tip = null;
  function ensure() {
    if (!tip) {
      tip = document.createElement("div");
      tip.className = "tooltip";
      tip.setAttribute("role", "tooltip");
      tip.hidden = true;
      document.body.appendChild(tip);
    }
    return tip;
  }
  document.addEventListener("pointerover", function (event) {
    var target = event.target.closest && event.target.closest("[data-tip]");
    if (!target) return;
    var box = ensure();
    box.textContent = target.getAttribute("data-tip");
    box.hidden = false;
  });
  document.addEventListener("pointermove", function (event) {
    if (!tip || tip.hidden) return;
    var x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    var y = event.clientY + 18 + tip.offsetHeight > window.innerHeight ? event.clientY - tip.offsetHeight - 10 : event.clientY + 18;
    tip.style.transform = "translate(" + x + "px," + y + "px)";
  });
  document.addEventListener("pointerout", function (event) {
    var target = event.target.closest && event.target.closest("[data-tip]");
    if (target && tip && !target.contains(event.relatedTarget)) tip.hidden = true;
  });
})();
