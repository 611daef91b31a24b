// Live parts of the pages: [data-refresh] swaps in a fragment every few seconds (the overview);
// [data-tail] polls a run's JSON and swaps in its live part until the run is finished.
(function () {
  "use strict";

  function fetchOk(url) {
    return fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } }).then(function (r) {
      if (!r.ok || r.redirected) throw new Error("stopped: " + r.status);
      return r;
    });
  }

  function refresh(el) {
    var every = parseInt(el.dataset.interval, 10) || 5000;
    var timer = setInterval(function () {
      if (document.hidden) return;
      fetchOk(el.dataset.refresh).then(function (r) { return r.text(); })
        .then(function (html) { el.innerHTML = html; })
        .catch(function () { clearInterval(timer); });
    }, every);
  }

  function tail(el) {
    var every = parseInt(el.dataset.interval, 10) || 2000;
    function poll() {
      fetchOk(el.dataset.tail).then(function (r) { return r.json(); }).then(function (data) {
        var old = el.querySelector("#output");
        var atBottom = !old || old.scrollTop + old.clientHeight >= old.scrollHeight - 8;
        el.innerHTML = data.html;
        var out = el.querySelector("#output");
        if (out && atBottom) out.scrollTop = out.scrollHeight;
        el.dataset.status = data.status;
        if (!data.terminal) setTimeout(poll, every);
      }).catch(function () { setTimeout(poll, every * 5); });
    }
    setTimeout(poll, every);
  }

  // Every form of the kit: a section marked data-shown-when="<a select's name> <value> ..." is shown,
  // and sent, only while that select has one of the values; rows of the kit are added and removed.
  function kitForm(form) {
    form.querySelectorAll("[data-shown-when]").forEach(function (section) {
      var words = section.dataset.shownWhen.split(" ");
      var select = form.querySelector("select[name='" + words[0] + "']");
      if (!select) return;
      function toggle() {
        var on = words.indexOf(select.value, 1) >= 1;
        section.hidden = !on;
        section.disabled = !on;
      }
      select.addEventListener("change", toggle);
      toggle();
    });
    form.addEventListener("click", function (event) {
      var button = event.target;
      if (button.matches(".add-row")) {
        var rows = form.querySelector("[data-rows='" + button.dataset.addRow + "']");
        var row = rows.lastElementChild.cloneNode(true);
        row.querySelectorAll("input").forEach(function (input) { input.value = ""; });
        rows.appendChild(row);
        row.querySelector("input").focus();
      } else if (button.matches(".remove-row")) {
        var all = button.closest(".rows");
        if (all.children.length > 1) button.closest(".row").remove();
        else button.closest(".row").querySelectorAll("input").forEach(function (input) { input.value = ""; });
      }
    });
  }

  // The job form: only the sections of the chosen kind and schedule type are shown (the others are
  // disabled, so they are not sent); (its rows are the kit's, kitForm); the schedule in words and
  // its next slots are fetched as it is typed. Without JavaScript it is a plain form that still works.
  function jobForm(form) {
    function toggle(select, attribute) {
      form.querySelectorAll("[" + attribute + "]").forEach(function (section) {
        var on = section.getAttribute(attribute).split(" ").indexOf(select.value) >= 0;
        section.hidden = !on;
        section.disabled = !on;
      });
    }
    var kind = form.querySelector("select[name=kind]");
    var type = form.querySelector("select[name=schedule_type]");
    // The target's suggestions are the chosen kind's (a datalist per kind).
    var target = form.querySelector("[data-options-by-kind]");
    function targets() { if (target) target.setAttribute("list", target.dataset.optionsByKind + kind.value); }
    kind.addEventListener("change", function () { toggle(kind, "data-kind"); targets(); });
    type.addEventListener("change", function () { toggle(type, "data-schedule"); preview(); });
    toggle(kind, "data-kind");
    targets();
    toggle(type, "data-schedule");


    var box = document.getElementById("schedule-preview");
    var timer = null, asked = 0;
    function preview() {
      clearTimeout(timer);
      timer = setTimeout(function () {
        var params = new URLSearchParams();
        ["schedule_type", "cron", "timezone", "every_seconds", "run_at", "dst_skipped", "dst_repeated", "name", "spread",
         "calendars", "business_days", "business_day_of_month"].forEach(function (name) {
          var input = form.querySelector("[name=" + name + "]");
          if (input) params.set(name, input.type === "checkbox" ? (input.checked ? "on" : "") : input.value);
        });
        var mine = ++asked;
        fetchOk(form.dataset.preview + "?" + params.toString()).then(function (r) { return r.json(); })
          .then(function (data) { if (mine === asked) showPreview(box, data); })
          .catch(function () {});
      }, 250);
    }
    ["cron", "timezone", "every_seconds", "run_at", "dst_skipped", "dst_repeated", "name", "spread", "calendars",
     "business_day_of_month"].forEach(function (name) {
      var input = form.querySelector("[name=" + name + "]");
      if (input) input.addEventListener("input", preview);
    });
    var businessDays = form.querySelector("[name=business_days]");
    if (businessDays) businessDays.addEventListener("change", preview);
  }

  function showPreview(box, data) {
    box.textContent = "";
    function add(parent, tag, text, attrs) {
      var el = document.createElement(tag);
      if (text) el.textContent = text;
      Object.keys(attrs || {}).forEach(function (key) { el.setAttribute(key, attrs[key]); });
      parent.appendChild(el);
      return el;
    }
    if (data.errors) {
      var texts = [];
      Object.keys(data.errors).forEach(function (name) { texts = texts.concat(data.errors[name]); });
      add(box, "p", texts.join(" "), { "class": "field-error", id: "schedule-error" });
      return;
    }
    add(box, "p", data.description, { "class": "schedule", id: "schedule-words" });
    if (!data.slots.length) { add(box, "p", "No upcoming runs.", { "class": "muted" }); return; }
    add(box, "h3", "Next " + data.slots.length + " runs (" + data.timezone + ")");
    var list = add(box, "ol", "", { "class": "slots", id: "schedule-slots" });
    data.slots.forEach(function (slot) { add(list, "li", slot); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-refresh]").forEach(refresh);
    document.querySelectorAll("[data-tail]").forEach(tail);
    document.querySelectorAll("form.form-kit").forEach(kitForm);
    document.querySelectorAll("[data-job-form]").forEach(jobForm);
  });
})();
