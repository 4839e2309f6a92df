// How this page is shown, read from its address before the first paint (loaded in <head>,
// not deferred, like theme.js): classes on <html> that static/css/shardscope.css reads.
//
//   ?present=1      presentation mode (classroom.js toggles it with p)
//   embeds (/embed/<scene>?…, the Embed dialog writes these):
//   ?aspect=16:9 | 4:3 | fill   the figure's box (fill: whatever the frame gives it)
//   ?controls=0     no player bar          ?caption=0   no caption
//   ?large=1        large type (caption and player)
//   ?start=&end=    the steps the player walks; ?autoplay=1&speed=0.5|1|2|4 (player.js)
//   box-pending     decks laid out for their box stay unseen until box.js has checked that
//                   they were drawn for their frame's (or swapped in the one that is)
(function () {
  "use strict";
  var query = new URLSearchParams(window.location.search);
  var html = document.documentElement;
  html.classList.add("box-pending");
  if (query.get("present") === "1") html.classList.add("present");
  var aspect = query.get("aspect");
  if (aspect === "16:9" || aspect === "4:3" || aspect === "fill") html.classList.add("aspect-" + aspect.replace(":", "-"));
  if (query.get("controls") === "0") html.classList.add("no-controls");
  if (query.get("caption") === "0") html.classList.add("no-caption");
  if (query.get("large") === "1") html.classList.add("large-type");
})();
