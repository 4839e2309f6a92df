// The Embed dialog (templates/_partials/share.html): its options become the /embed URL's query
// keys (static/js/view.js and player.js read them): aspect, start, end, autoplay, speed,
// controls=0, caption=0, large=1.
//
// The dialog counts steps from 1, as the player does; the URL's start and end count frames from
// 0 (start=0 is step 1), as frame does. A start after the end, or a step the scene does not
// have, is refused: the message says which and why, and there is no snippet to copy.
(function () {
  "use strict";
  var SIZES = { "16:9": ["960", "540"], "4:3": ["960", "720"], "fill": ["100%", "100%"] };

  function opt(root, name) { return root.querySelector('[data-embed-opt="' + name + '"]'); }

  // the steps chosen, or the reason they are refused
  function range(root) {
    var start = opt(root, "start"), end = opt(root, "end");
    if (!start || !end) return { first: 0, last: null };
    var steps = parseInt(end.max, 10);
    var a = start.value === "" ? 1 : Number(start.value), b = end.value === "" ? steps : Number(end.value);
    var whole = function (x) { return Number.isInteger(x) && x >= 1 && x <= steps; };
    if (!whole(a)) return { error: "Start at step must be a step from 1 to " + steps + " (got " + start.value + ").", field: start };
    if (!whole(b)) return { error: "End at step must be a step from 1 to " + steps + " (got " + end.value + ").", field: end };
    if (a > b) return { error: "Start at step (" + a + ") is after End at step (" + b + "): start at or before the end.", field: start };
    return { first: a - 1, last: b === steps ? null : b - 1 };
  }

  function snippet(root, chosen) {
    var url = new URL(window.location.href);
    url.pathname = "/embed" + url.pathname;
    ["present", "aspect", "start", "end", "autoplay", "speed", "controls", "caption", "large", "theme"].forEach(function (k) { url.searchParams.delete(k); });
    var aspect = opt(root, "aspect") ? opt(root, "aspect").value : "16:9";
    var size = SIZES[aspect] || SIZES["16:9"];
    url.searchParams.set("aspect", aspect);
    if (chosen.first) url.searchParams.set("start", String(chosen.first));
    if (chosen.last !== null) url.searchParams.set("end", String(chosen.last));
    if (opt(root, "autoplay") && opt(root, "autoplay").checked) {
      url.searchParams.set("autoplay", "1");
      url.searchParams.set("speed", opt(root, "speed").value);
    }
    if (opt(root, "controls") && opt(root, "controls").checked) url.searchParams.set("controls", "0");
    if (opt(root, "caption") && opt(root, "caption").checked) url.searchParams.set("caption", "0");
    if (opt(root, "large") && opt(root, "large").checked) url.searchParams.set("large", "1");
    var theme = opt(root, "theme");
    if (theme && theme.value) url.searchParams.set("theme", theme.value);
    var area = root.querySelector("[data-embed-code]");
    var title = area.dataset.title || "Shardscope";
    var style = aspect === "fill" ? "border:0;width:100%;height:100%" : "border:0;max-width:100%";
    return '<iframe src="' + url.href + '" width="' + size[0] + '" height="' + size[1] + '" style="' + style + '" ' +
      'title="' + title.replace(/"/g, "&quot;") + ' (Shardscope)" loading="lazy" allowfullscreen></iframe>';
  }

  function refresh(root) {
    var chosen = range(root);
    var error = root.querySelector("[data-embed-error]");
    var area = root.querySelector("[data-embed-code]");
    var copy = root.querySelector("[data-embed-copy]");
    [opt(root, "start"), opt(root, "end")].forEach(function (f) { if (f) f.removeAttribute("aria-invalid"); });
    root.querySelector("[data-embed-copied]").hidden = true;
    if (chosen.error) {
      chosen.field.setAttribute("aria-invalid", "true");
      error.textContent = chosen.error;
      error.hidden = false;
      area.value = "";
      copy.disabled = true;
      return;
    }
    error.hidden = true;
    area.value = snippet(root, chosen);
    copy.disabled = false;
  }

  // The dialog's elements are found when used: stage.js keeps the toolbar on screen from one
  // state to the next, bringing its parts up to date (or swapping a part whose shape changed),
  // so a listener must not hold on to the elements it found first.
  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target : null;
    var share = target && target.closest(".share");
    if (!share) return;
    if (target.closest("[data-embed-open]")) {
      refresh(share);
      var start = opt(share, "start");
      share.querySelector("[data-embed-dialog]").showModal();
      share.querySelector("[data-embed-code]").select();
      if (start && document.activeElement !== start) share.querySelector("[data-embed-code]").focus();
    } else if (target.closest("[data-embed-copy]")) {
      var area = share.querySelector("[data-embed-code]");
      if (!area.value) return;
      area.select();
      var done = function () { share.querySelector("[data-embed-copied]").hidden = false; };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(area.value).then(done, done);
      else { document.execCommand("copy"); done(); }
    }
  });
  ["input", "change"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var options = event.target.closest && event.target.closest("[data-embed-options]");
      if (options) refresh(options.closest(".share"));
    });
  });
  window.ShardscopeShare = { range: range, refresh: refresh };
})();
