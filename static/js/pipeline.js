// Pipeline deck: hovering (or focusing) a pass draws its dependencies — solid arrows from the
// passes whose output it reads, dashed arrows to the passes that read its output — and fades
// the rest. Passes are <g class="pp" data-pass="i" data-deps="j k"> (app/scenes/pipeline/deck_svg.py);
// the listeners sit on the document, so decks swapped in by htmx work without re-initialising.
//
// The time cursor, its label, the header (and the veil of a summarised timeline) are drawn once,
// at the frame the page opened on; when the player shows frame k they move to the time in that
// frame's layer: <g class="frame" data-frame="k" data-x data-pill data-t data-head>.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function box(g) {
    var r = g.querySelector("rect.body");
    return { x: +r.getAttribute("x"), y: +r.getAttribute("y"),
             w: +r.getAttribute("width"), h: +r.getAttribute("height") };
  }

  function visible(g) {
    var frame = g.closest("g.frame");
    return !frame || frame.getAttribute("display") !== "none";
  }

  // A curved arrow from the right edge of `a` to the left edge of `b`.
  function arrow(layer, a, b, outgoing) {
    var x0 = a.x + a.w, y0 = a.y + a.h / 2, x1 = b.x, y1 = b.y + b.h / 2;
    var mx = (x0 + x1) / 2, my = (y0 + y1) / 2 - Math.min(40, Math.abs(x1 - x0) / 4 + 8);
    var g = document.createElementNS(SVG, "g");
    g.setAttribute("class", "dep" + (outgoing ? " out" : ""));
    var path = document.createElementNS(SVG, "path");
    var angle = Math.atan2(y1 - my, x1 - mx), size = 9;
    var bx = x1 - size * Math.cos(angle), by = y1 - size * Math.sin(angle);
    path.setAttribute("d", "M" + x0 + "," + y0 + " Q" + mx + "," + my + " " + bx + "," + by);
    var head = document.createElementNS(SVG, "polygon");
    var left = [bx + 0.5 * size * Math.sin(angle), by - 0.5 * size * Math.cos(angle)];
    var right = [bx - 0.5 * size * Math.sin(angle), by + 0.5 * size * Math.cos(angle)];
    head.setAttribute("points", x1 + "," + y1 + " " + left.join(",") + " " + right.join(","));
    g.appendChild(path);
    g.appendChild(head);
    layer.appendChild(g);
  }

  function clear(svg) {
    var layer = svg.querySelector(".pp-hover");
    if (layer) layer.textContent = "";
    svg.querySelectorAll("g.pp.hovered").forEach(function (g) { g.classList.remove("hovered"); });
  }

  function show(g) {
    var svg = g.ownerSVGElement;
    var layer = svg && svg.querySelector(".pp-hover");
    if (!layer) return;
    clear(svg);
    g.classList.add("hovered");
    var me = box(g);
    (g.dataset.deps || "").split(" ").forEach(function (k) {
      if (!k) return;
      var source = svg.querySelector('g.pp[data-pass="' + k + '"]');
      if (source && visible(source)) { source.classList.add("hovered"); arrow(layer, box(source), me, false); }
    });
    svg.querySelectorAll('g.pp[data-deps~="' + g.dataset.pass + '"]').forEach(function (reader) {
      if (visible(reader)) { reader.classList.add("hovered"); arrow(layer, me, box(reader), true); }
    });
  }

  document.addEventListener("pointerover", function (event) {
    var g = event.target.closest && event.target.closest(".pipeline-deck g.pp");
    if (g) show(g);
  });
  document.addEventListener("pointerout", function (event) {
    var g = event.target.closest && event.target.closest(".pipeline-deck g.pp");
    if (g && !(event.relatedTarget && g.contains(event.relatedTarget))) clear(g.ownerSVGElement);
  });

  // The player showed frame k: move the cursor, its label, the veil and the header there.
  document.addEventListener("player:frame", function (event) {
    var svg = event.target.querySelector && event.target.querySelector("svg.pipeline-deck");
    var frame = svg && svg.querySelector('g.frame[data-frame="' + event.detail.frame + '"]');
    var now = svg && svg.querySelector(".pp-now");
    if (!frame || !now) return;
    var d = frame.dataset;
    var cursor = now.querySelector(".pp-cursor");
    if (event.detail.frame === 0) cursor.setAttribute("display", "none");
    else cursor.removeAttribute("display");
    var line = cursor.querySelector("line"), pill = cursor.querySelector("rect"),
        label = cursor.querySelector("text");
    line.setAttribute("x1", d.x);
    line.setAttribute("x2", d.x);
    pill.setAttribute("x", String(+d.pill - pill.width.baseVal.value / 2));
    label.setAttribute("x", d.pill);
    label.textContent = d.t;
    now.querySelector(".step-header").textContent = d.head;
    var veil = now.querySelector(".veil");
    if (veil) {
      veil.setAttribute("x", d.x);
      veil.setAttribute("width", String(Math.max(0, +veil.dataset.right - d.x)));
    }
  });
})();
