// A box that scrolls sideways (a wide output table, a Markdown table, a display equation on a phone) shows that it
// does: its content fades out at each edge that still has more to see (manyheads.css, [data-scroll-cue]). A shadow
// painted behind the content was not enough: striped table cells cover it. Boxes are measured again when the page
// is resized, when MathJax or the widget manager draws something later, and while the reader scrolls the box.
(function () {
  var BOXES =
    "div.cell_output div.output, .bd-article .pst-scrollable-table-container, .bd-article .table-wrapper, " +
    'mjx-container[display="true"]';

  function mark(box) {
    var more = box.scrollWidth > box.clientWidth + 1;
    if (!more) {
      box.removeAttribute("data-scroll-cue");
      return;
    }
    var left = box.scrollLeft > 1;
    var right = box.scrollLeft + box.clientWidth < box.scrollWidth - 1;
    box.setAttribute("data-scroll-cue", left && right ? "both" : left ? "left" : "right");
    if (!box.hasAttribute("data-scroll-watched")) {
      box.setAttribute("data-scroll-watched", "");
      box.addEventListener("scroll", function () { mark(box); }, { passive: true });
    }
  }

  var pending = false;
  function markAll() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () {
      pending = false;
      document.querySelectorAll(BOXES).forEach(mark);
    });
  }

  window.addEventListener("load", markAll);
  window.addEventListener("resize", markAll);
  document.addEventListener("DOMContentLoaded", function () {
    markAll();
    new MutationObserver(markAll).observe(document.body, { childList: true, subtree: true });
  });
})();
