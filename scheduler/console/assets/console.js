// The console works without this script; it asks before a form marked
// data-confirm is sent, and shows times in the browser's zone on hover.
"use strict";
document.addEventListener("submit", function (e) {
  var msg = e.target.getAttribute && e.target.getAttribute("data-confirm");
  if (msg && !window.confirm(msg)) {
    e.preventDefault();
  }
});
document.querySelectorAll("time[datetime]").forEach(function (t) {
  var d = new Date(t.getAttribute("datetime"));
  if (!isNaN(d)) {
    t.title = d.toLocaleString() + " (" + t.title + ")";
  }
});
