// Eval Studio: small progressive enhancements. Every page works without this file.
(function () {
  "use strict";

  // Threshold slider <-> number field, and the strictness band of the current value.
  document.querySelectorAll("[data-threshold]").forEach(function (box) {
    var range = box.querySelector("[data-threshold-range]");
    var number = box.querySelector("[data-threshold-number]");
    var badge = box.querySelector("[data-band]");
    var help = box.querySelector("[data-band-help]");
    var rows = Array.prototype.slice.call(box.querySelectorAll("[data-band-row]"));
    // The value as typed: a number outside [0, 1] is left for the server to refuse with the
    // CLI's message (scoring.options.check_threshold), never rewritten (1.5 became 0.01).
    function unit(value) {
      return parseFloat(value);
    }
    function show(value) {
      var v = unit(value);
      if (isNaN(v) || v < 0 || v > 1) return;
      var row = rows.find(function (r) { return v >= parseFloat(r.dataset.low); }) || rows[rows.length - 1];
      rows.forEach(function (r) { r.classList.toggle("on", r === row); });
      badge.className = "band " + row.dataset.bandRow;
      badge.textContent = row.dataset.label;
      var text = row.dataset.help;
      help.textContent = text.charAt(0).toUpperCase() + text.slice(1) + ". Default 0.80.";
    }
    range.addEventListener("input", function () { number.value = parseFloat(range.value).toFixed(2); show(range.value); });
    number.addEventListener("input", function () {
      var v = unit(number.value);
      if (!isNaN(v) && v >= 0 && v <= 1) range.value = v;
      show(number.value);
    });
  });

  // "+ Add another reference" clones an empty reference field.
  document.querySelectorAll("[data-add-reference]").forEach(function (button) {
    button.addEventListener("click", function () {
      var areas = button.parentNode.querySelectorAll("textarea.ref");
      var copy = areas[areas.length - 1].cloneNode(false);
      copy.value = "";
      copy.removeAttribute("required");
      button.parentNode.insertBefore(copy, button);
      copy.focus();
    });
  });

  // Confirm destructive form posts.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });

  // Selects that apply at once.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });

  // Copy buttons on code snippets (pre.copyable > code[id]). The clipboard API needs a
  // secure context (https, or this machine's 127.0.0.1/localhost); elsewhere the text is
  // selected so Ctrl+C copies it.
  document.querySelectorAll("pre.copyable > code[id]").forEach(function (code) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "btn small copy";
    button.id = code.id + "-copy";
    button.setAttribute("data-copy", code.id);
    button.textContent = "Copy";
    function done(label) {
      button.textContent = label;
      window.setTimeout(function () { button.textContent = "Copy"; }, 2000);
    }
    function selectText() {
      var range = document.createRange();
      range.selectNodeContents(code);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      done("Press Ctrl+C");
    }
    button.addEventListener("click", function () {
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(code.innerText).then(function () { done("Copied"); }, selectText);
      } else {
        selectText();
      }
    });
    code.parentNode.insertBefore(button, code);
  });

  // Charts: figures built server-side (plotly's Python API), drawn by the bundled plotly.js.
  function drawCharts() {
    document.querySelectorAll("[data-chart]").forEach(function (el) {
      var data = document.getElementById(el.dataset.chart);
      if (!data || !window.Plotly) return;
      var fig = JSON.parse(data.textContent);
      window.Plotly.newPlot(el, fig.data, fig.layout, { displaylogo: false, responsive: true })
        .then(function () { el.dataset.rendered = "true"; });
    });
  }
  if (document.querySelector("[data-chart]")) {
    if (window.Plotly) drawCharts();
    else window.addEventListener("load", drawCharts);
  }
})();
