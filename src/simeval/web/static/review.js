// The review queue's keys (review.html documents them): p pass, f fail, s skip, n note,
// v score. Inside the note or score field, Enter and Esc go back to the keys (Enter does not
// submit there: the verdict is the reviewer's choice, not the form's default button).
(function () {
  "use strict";
  var form = document.getElementById("review-form");
  if (!form) return;
  var fields = [document.getElementById("review-note"), document.getElementById("review-score")];
  var sent = false;
  function press(id) {
    var el = document.getElementById(id);
    if (!el || sent) return;
    sent = true; // one review per page: a key held down must not send twice
    el.click();
  }
  fields.forEach(function (field) {
    field.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === "Escape") {
        event.preventDefault();
        field.blur();
      }
    });
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var active = document.activeElement;
    if (active && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) return;
    var keys = { p: "review-pass", f: "review-fail", s: "review-skip" };
    var key = event.key.toLowerCase();
    if (keys[key]) {
      event.preventDefault();
      press(keys[key]);
    } else if (key === "n" || key === "v") {
      event.preventDefault();
      fields[key === "n" ? 0 : 1].focus();
    }
  });
})();
