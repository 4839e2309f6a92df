// Colour theme: "auto" follows the system; "light" and "dark" are remembered per browser.
// Loaded in <head> without defer so the page never flashes the wrong theme.
(function () {
  var KEY = "shardscope-theme";
  var order = ["auto", "light", "dark"];
  function stored() {
    try { return localStorage.getItem(KEY) || "auto"; } catch (e) { return "auto"; }
  }
  function apply(theme) {
    if (theme === "auto") document.documentElement.removeAttribute("data-theme");
    else document.documentElement.setAttribute("data-theme", theme);
    document.querySelectorAll("[data-theme-label]").forEach(function (el) { el.textContent = theme; });
  }
  apply(stored());
  document.addEventListener("DOMContentLoaded", function () {
    apply(stored());
    document.querySelectorAll("[data-theme-toggle]").forEach(function (button) {
      button.addEventListener("click", function () {
        var next = order[(order.indexOf(stored()) + 1) % order.length];
        try { localStorage.setItem(KEY, next); } catch (e) { /* private mode: still switch */ }
        apply(next);
      });
    });
  });
})();
