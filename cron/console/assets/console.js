// The console's scripts: local times, actions without a full reload, a
// history that refreshes itself, and the job form's schedule inputs. The
// pages work without them.
"use strict";
(function () {
  // A time marked data-rel shows how far it is from now ("5 min ago",
  // "in 3 s"), as the server wrote it; this keeps it current. Its title
  // holds the absolute time.
  function relative(ms) {
    var d = Math.abs(ms), future = ms < 0, n, unit;
    if (d < 1000) return "now";
    if (d < 60000) { n = Math.floor(d / 1000); unit = "s"; }
    else if (d < 3600000) { n = Math.floor(d / 60000); unit = "min"; }
    else if (d < 48 * 3600000) { n = Math.floor(d / 3600000); unit = "h"; }
    else { n = Math.floor(d / 86400000); unit = "d"; }
    return future ? "in " + n + " " + unit : n + " " + unit + " ago";
  }
  function localTimes(root) {
    root.querySelectorAll("time[datetime][data-rel]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      el.textContent = relative(Date.now() - d);
    });
  }
  setInterval(function () { if (!document.hidden) localTimes(document); }, 10000);

  function flash(msg, bad) {
    var f = document.getElementById("flash");
    if (!f) return;
    f.textContent = msg;
    f.classList.toggle("bad", !!bad);
    f.classList.remove("hidden");
  }

  // A form marked data-fetch is sent with fetch; the page it leads to
  // replaces the main part of this one.
  function fetchForms(root) {
    root.querySelectorAll("form[data-fetch]").forEach(function (form) {
      form.addEventListener("submit", function (ev) {
        ev.preventDefault();
        var q = form.getAttribute("data-confirm");
        if (q && !window.confirm(q)) return;
        var body = new URLSearchParams(new FormData(form, ev.submitter || null));
        fetch(form.action, { method: "POST", body: body, credentials: "same-origin" })
          .then(function (resp) {
            return resp.text().then(function (html) {
              var doc = new DOMParser().parseFromString(html, "text/html");
              if (!resp.ok) {
                var e = doc.getElementById("error");
                flash((e ? e.textContent : resp.statusText) + " (" + resp.status + ")", true);
                return;
              }
              var main = doc.querySelector("main");
              if (main) {
                document.querySelector("main").replaceWith(main);
                document.title = doc.title;
                if (resp.redirected) history.replaceState(null, "", resp.url);
                init(main);
              }
            });
          })
          .catch(function (err) { flash("request failed: " + err, true); });
      });
    });
  }

  // A part marked data-refresh="ms" reloads itself from its page's
  // /history address while the page is visible.
  function refresh(root) {
    root.querySelectorAll("[data-refresh]").forEach(function (part) {
      var ms = parseInt(part.getAttribute("data-refresh"), 10);
      if (!(ms > 0)) return;
      var url = location.pathname.replace(/\/$/, "") + "/history";
      var timer = setInterval(function () {
        if (!document.body.contains(part)) { clearInterval(timer); return; }
        if (document.hidden) return;
        fetch(url, { credentials: "same-origin" }).then(function (resp) {
          if (!resp.ok) return null;
          return resp.text();
        }).then(function (html) {
          if (!html) return;
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById("history");
          if (fresh && document.body.contains(part)) {
            localTimes(fresh);
            part.querySelector(".scroll").replaceWith(fresh.querySelector(".scroll"));
          }
        }).catch(function () {});
      }, ms);
    });
  }

  // The job form shows the inputs of the chosen schedule kind and type.
  function jobForm(root) {
    var form = root.querySelector("#jobform");
    if (!form) return;
    var kind = form.querySelector("[name='schedule.kind']");
    var type = form.querySelector("[name='type']");
    function sync() {
      form.querySelectorAll("[data-sched]").forEach(function (f) {
        f.classList.toggle("hidden", f.getAttribute("data-sched") !== kind.value);
      });
      var http = !type || type.value === "http";
      form.querySelectorAll("[data-http]").forEach(function (f) { f.classList.toggle("hidden", !http); });
      var args = form.querySelector("[name='args']");
      if (args) args.closest(".field").classList.toggle("hidden", http);
    }
    kind.addEventListener("change", sync);
    if (type) type.addEventListener("change", sync);
    sync();
  }

  // A form marked data-until sends its datetime-local input (read in the
  // browser's zone) as an RFC 3339 time in UTC, in its hidden "until".
  function untilForms(root) {
    root.querySelectorAll("form[data-until]").forEach(function (form) {
      form.addEventListener("submit", function () {
        var local = form.querySelector("[name='until_local']");
        var until = form.querySelector("input[type='hidden'][name='until']");
        if (!local || !until) return;
        until.value = "";
        if (local.value) {
          var d = new Date(local.value);
          if (!isNaN(d)) until.value = d.toISOString();
        }
      }, true);
    });
  }

  // Replaces the main part of the page with that of the page at url.
  function reloadMain(url) {
    return fetch(url, { credentials: "same-origin" }).then(function (resp) {
      if (!resp.ok) return false;
      return resp.text().then(function (html) {
        var main = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        var cur = document.querySelector("main");
        if (!main || !cur) return false;
        cur.replaceWith(main);
        init(main);
        return true;
      });
    });
  }

  // A job paused until a time shows as enabled once that time has come:
  // the page reloads its main part then, and again a few times until the
  // runner has resumed the job.
  function pauseEnd(root) {
    var t = root.querySelector("#state time[datetime]");
    if (!t) return;
    var ms = new Date(t.getAttribute("datetime")) - Date.now();
    if (isNaN(ms) || ms > 24 * 3600 * 1000) return;
    var tries = 0;
    function check() {
      if (!document.body.contains(t)) return;
      reloadMain(location.href).then(function (ok) {
        var still = document.querySelector("#state time[datetime]");
        if (ok && still && ++tries < 10) setTimeout(check, 1000);
      }).catch(function () {});
    }
    setTimeout(check, Math.max(ms, 0) + 500);
  }

  function init(root) {
    untilForms(root);
    pauseEnd(root);
    localTimes(root);
    fetchForms(root);
    refresh(root);
    jobForm(root);
  }
  document.addEventListener("DOMContentLoaded", function () { init(document); });
})();
