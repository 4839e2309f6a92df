// Colour theme: "auto" follows the system; "light", "dark" and "contrast" (white on black, every
// text at WCAG AAA contrast: static/css/shardscope.css) are remembered per browser. The address
// may ask for one (?theme=light|dark|contrast|auto, on pages and embeds alike): it wins for
// that page and is not remembered, so an embed in a slide keeps the theme its author chose.
// Loaded in <head> without defer so the page never flashes the wrong theme.
(function () {
  var KEY = "shardscope-theme";
  var order = ["auto", "light", "dark", "contrast"];
  var asked = new URLSearchParams(window.location.search).get("theme");
  if (order.indexOf(asked) < 0) asked = null;
  function stored() {
    try { return localStorage.getItem(KEY) || "auto"; } catch (e) { return "auto"; }
  }
  function chosen() { return asked || stored(); }
  function apply(theme) {
    if (order.indexOf(theme) < 0) theme = "auto";
    if (theme === "auto") document.documentElement.removeAttribute("data-theme");
    else document.documentElement.setAttribute("data-theme", theme);
    document.querySelectorAll("[data-theme-label]").forEach(function (el) { el.textContent = theme; });
  }
  apply(chosen());
  document.addEventListener("DOMContentLoaded", function () {
    apply(chosen());
    document.querySelectorAll("[data-theme-toggle]").forEach(function (button) {
      button.addEventListener("click", function () {
        var next = order[(order.indexOf(chosen()) + 1) % order.length];
        asked = null;   // a choice made here outlives the address's
        try { localStorage.setItem(KEY, next); } catch (e) { /* private mode: still switch */ }
        apply(next);
      });
    });
  });
  window.ShardscopeTheme = { apply: apply, chosen: chosen, themes: order };
})();
