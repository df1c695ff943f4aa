// Explorers without a kernel (manyheads.viz.explorers, issue 27). On the book's pages the widget manager draws an
// explorer's saved state, but no Python runs when a control changes. This script does what the kernel would: when a
// control of a box marked "mh-explorer--<name>" changes, it reads every control of that box and writes into its
// view what window.manyheadsExplorers[<name>](values) returns (an HTML string), a JavaScript port of the Python
// function (book_static/head_budget.js for the head-budget calculator). It listens on the document, so explorers
// the widget manager draws later need no binding, and it runs after the control's own handler (the event bubbles
// up to here), so it reads the value the widget kept: an integer box has already clamped it to its bounds.
(function () {
  var registry = (window.manyheadsExplorers = window.manyheadsExplorers || {});
  var PREFIX = { explorer: "mh-explorer--", control: "mh-control--", kind: "mh-kind--" };

  function suffix(element, prefix) {
    for (var i = 0; i < element.classList.length; i++) {
      if (element.classList[i].indexOf(prefix) === 0) return element.classList[i].slice(prefix.length);
    }
    return null;
  }

  // How a control of each kind (manyheads.viz.explorers.CONTROL_KINDS) holds its value in the page.
  var READERS = {
    int: function (control) {
      var input = control.querySelector("input");
      var value = input ? parseInt(input.value, 10) : NaN; // what ipywidgets' IntTextView keeps (parseInt)
      return isNaN(value) ? undefined : value;
    },
  };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;" }[c];
    });
  }

  function content(box, cls) {
    var part = box.querySelector("." + cls);
    return part && (part.querySelector(".widget-html-content") || part);
  }

  function problem(text) {
    return (
      '<div style="color:#a40000;border-left:4px solid #a40000;padding:4px 8px">' +
      "<b>Could not draw this setting.</b> " + escapeHtml(text) + "</div>"
    );
  }

  function refresh(box) {
    var name = suffix(box, PREFIX.explorer);
    var view = content(box, "mh-explorer-view");
    var message = content(box, "mh-explorer-message");
    if (!view || !message) return;
    var values = {};
    var controls = box.querySelectorAll(".mh-control");
    for (var i = 0; i < controls.length; i++) {
      var read = READERS[suffix(controls[i], PREFIX.kind)];
      var value = read ? read(controls[i]) : undefined;
      if (value === undefined) return; // nothing the widget would accept: it keeps its old value, and so do we
      values[suffix(controls[i], PREFIX.control)] = value;
    }
    var port = registry[name];
    if (typeof port !== "function") {
      message.innerHTML = problem("This page cannot compute the explorer " + name + ": run the notebook instead.");
      return;
    }
    try {
      view.innerHTML = port(values);
      message.innerHTML = "";
    } catch (error) {
      message.innerHTML = problem((error && error.name ? error.name + ": " : "") + (error && error.message));
    }
    box.dispatchEvent(new CustomEvent("mh-explorer-drawn", { bubbles: true, detail: { name: name, values: values } }));
  }

  document.addEventListener("change", function (event) {
    var control = event.target && event.target.closest && event.target.closest(".mh-control");
    var box = control && control.closest(".mh-explorer");
    if (box) refresh(box);
  });
})();
