// Explorers without a kernel (manyheads.viz.explorers, issue 27). On the book's pages the widget manager draws an
// explorer's saved state, but no Python runs when a control changes. This script does what the kernel would: when a
// control of a box marked "mh-explorer--<name>" changes, it reads every control of that box and writes into its
// view what window.manyheadsExplorers[<name>](values) returns (an HTML string), a JavaScript port of the Python
// function (book_static/head_budget.js for the head-budget calculator). It listens on the document, so explorers
// the widget manager draws later need no binding, and it runs after the control's own handler (the event bubbles
// up to here), so it reads the value the widget kept: an integer box has already clamped it to its bounds.
// Figure explorers (figure_explorer) need no port: the box carries every state of its controls' grid, computed by
// the Python function the kernel runs, and this script draws the one the controls select (section below).
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
    float: function (control) {
      var readout = control.querySelector(".widget-readout"); // a slider shows its value there (ipywidgets 7 and 8)
      // ipywidgets 8 formats with d3-format, which writes a minus as U+2212 ("−2.00"), which parseFloat refuses
      var text = readout ? String(readout.textContent || readout.value || "").replace(/\u2212/g, "-") : "";
      var value = parseFloat(text);
      return isNaN(value) ? undefined : value;
    },
    choice: function (control) {
      var select = control.querySelector("select");
      return select && select.selectedIndex >= 0 ? select.selectedIndex : undefined; // the option's position
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
    if (box.querySelector(".mh-states-data")) return showState(box);
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

  // Figure explorers with stored states (manyheads.viz.explorers.figure_explorer). The box holds every state of its
  // controls' grid (a script of type application/json, class mh-states-data); when a control moves, the state for
  // the controls' grid positions is drawn as SVG in place of the saved picture (drawPanels: what panels_figure draws
  // with matplotlib under a kernel). Sliders change no form field, so their readouts are watched instead.
  var SVG = "http://www.w3.org/2000/svg";
  var statesOf = typeof WeakMap === "function" ? new WeakMap() : null;

  function storedStates(box) {
    var cached = statesOf && statesOf.get(box);
    if (cached) return cached;
    var data = JSON.parse(box.querySelector(".mh-states-data").textContent);
    if (statesOf) statesOf.set(box, data);
    return data;
  }

  function gridIndex(grid, value) {
    var best = -1;
    for (var i = 0; i < grid.length; i++) {
      if (best < 0 || Math.abs(grid[i] - value) < Math.abs(grid[best] - value)) best = i;
    }
    return best;
  }

  function showState(box) {
    var data = storedStates(box);
    var indices = [];
    for (var i = 0; i < data.controls.length; i++) {
      var argument = data.controls[i];
      var control = box.querySelector(".mh-control--" + argument);
      var read = control && READERS[suffix(control, PREFIX.kind)];
      var value = read ? read(control) : undefined;
      if (value === undefined) return;
      // a slider's readout holds its value; a dropdown's position is the grid position
      indices.push(suffix(control, PREFIX.kind) === "choice" ? value : gridIndex(data.grids[argument], value));
    }
    var key = indices.join(",");
    var drawn = box.querySelector(".mh-explorer-drawn");
    if (key === (drawn ? drawn.getAttribute("data-key") : data.initial)) return; // already shown
    var state = data.states[key];
    var message = content(box, "mh-explorer-message");
    if (!state) {
      if (message) message.innerHTML = problem("This page stores no picture for this setting: run the notebook.");
      return;
    }
    var picture = box.querySelector(".mh-explorer-view");
    if (!drawn) {
      drawn = document.createElement("div");
      drawn.className = "mh-explorer-drawn";
      picture.parentNode.insertBefore(drawn, picture.nextSibling);
    }
    picture.style.display = "none";
    drawn.innerHTML = "";
    drawn.appendChild(drawPanels(state));
    drawn.setAttribute("data-key", key);
    if (message) message.innerHTML = "";
    var name = suffix(box, PREFIX.explorer);
    box.dispatchEvent(new CustomEvent("mh-explorer-drawn", { bubbles: true, detail: { name: name, key: key } }));
  }

  function node(parent, tag, attributes, text) {
    var element = document.createElementNS(SVG, tag);
    for (var name in attributes) element.setAttribute(name, attributes[name]);
    if (text !== undefined) element.textContent = text;
    parent.appendChild(element);
    return element;
  }

  function ticks(low, high) {
    var raw = (high - low) / 5;
    var power = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * power; }).find(function (s) { return s >= raw; });
    var out = [];
    for (var t = Math.ceil(low / step - 1e-9) * step; t <= high + 1e-9; t += step) out.push(Math.round(t / step) * step);
    return out;
  }

  function label(t) {
    return String(Math.round(t * 1000) / 1000).replace("-", "\u2212");
  }

  // One panel in the rectangle (x, y, w, h) of the figure: frame, ticks, labels, title, then the marks.
  function drawPanel(svg, panel, x, y, w, h) {
    var left = x + 62, top = y + 46, width = w - 76, height = h - 46 - (panel.rotate ? 62 : 44);
    var xs, ys, sx, sy;
    if (panel.kind === "bar") {
      var ylim = panel.ylim || [0, Math.max.apply(null, panel.y)];
      sy = function (v) { return top + height * (1 - (v - ylim[0]) / (ylim[1] - ylim[0])); };
      var band = width / panel.x.length;
      sx = function (i) { return left + band * (i + 0.5); };
      ys = ticks(ylim[0], ylim[1]);
      panel.y.forEach(function (v, i) {
        node(svg, "rect", { x: sx(i) - 0.4 * band, width: 0.8 * band, y: Math.min(sy(v), sy(0)),
          height: Math.abs(sy(0) - sy(v)), fill: panel.colors[i] });
      });
      (panel.notes || []).forEach(function (note) {
        node(svg, "text", { x: sx(note[0]), y: sy(note[1]), "text-anchor": "middle", "font-size": 15 }, note[2]);
      });
      panel.x.forEach(function (text, i) {
        var attributes = { x: sx(i), y: top + height + 16, "text-anchor": "middle", "font-size": 13 };
        if (panel.rotate) {
          attributes["text-anchor"] = "end";
          attributes.transform = "rotate(-" + panel.rotate + " " + sx(i) + " " + (top + height + 12) + ")";
          attributes.y = top + height + 12;
        }
        node(svg, "text", attributes, text);
      });
    } else {
      var px = panel.points.map(function (p) { return p[0]; }), py = panel.points.map(function (p) { return p[1]; });
      var x0 = Math.min.apply(null, px), x1 = Math.max.apply(null, px);
      var y0 = Math.min.apply(null, py), y1 = Math.max.apply(null, py);
      var dx = (x1 - x0 || 1) * 0.2, dy = (y1 - y0 || 1) * 0.2;
      x0 -= dx; x1 += dx; y0 -= dy; y1 += dy;
      var scale = Math.min(width / (x1 - x0), height / (y1 - y0)); // equal aspect: the wider range sets the scale
      var cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
      x0 = cx - width / 2 / scale; x1 = cx + width / 2 / scale; y0 = cy - height / 2 / scale; y1 = cy + height / 2 / scale;
      sx = function (v) { return left + (v - x0) * scale; };
      sy = function (v) { return top + height - (v - y0) * scale; };
      xs = ticks(x0, x1);
      ys = ticks(y0, y1);
      if (x0 < 0 && x1 > 0) node(svg, "line", { x1: sx(0), x2: sx(0), y1: top, y2: top + height, stroke: "#ccc" });
      if (y0 < 0 && y1 > 0) node(svg, "line", { x1: left, x2: left + width, y1: sy(0), y2: sy(0), stroke: "#ccc" });
      panel.points.forEach(function (p, i) {
        node(svg, "circle", { cx: sx(p[0]), cy: sy(p[1]), r: 3.5, fill: panel.colors[i] });
        node(svg, "text", { x: sx(p[0]) + 5.5, y: sy(p[1]) - 5.5 - (panel.rises[i] * 100) / 72, "font-size": 13 },
          panel.labels[i]);
      });
      xs.forEach(function (t) {
        node(svg, "text", { x: sx(t), y: top + height + 16, "text-anchor": "middle", "font-size": 13 }, label(t));
      });
    }
    node(svg, "rect", { x: left, y: top, width: width, height: height, fill: "none", stroke: "#000" });
    ys.forEach(function (t) {
      node(svg, "text", { x: left - 6, y: sy(t) + 4, "text-anchor": "end", "font-size": 13 }, label(t));
    });
    if (panel.xlabel) {
      node(svg, "text", { x: left + width / 2, y: y + h - 6, "text-anchor": "middle", "font-size": 14 }, panel.xlabel);
    }
    if (panel.ylabel) {
      var ly = top + height / 2;
      node(svg, "text", { x: x + 14, y: ly, "text-anchor": "middle", "font-size": 14,
        transform: "rotate(-90 " + (x + 14) + " " + ly + ")" }, panel.ylabel);
    }
    var lines = String(panel.title || "").split("\n");
    lines.forEach(function (line, i) {
      node(svg, "text", { x: left + width / 2, y: top - 8 - 17 * (lines.length - 1 - i), "text-anchor": "middle",
        "font-size": 15 }, line);
    });
  }

  function drawPanels(state) {
    var W = state.size[0] * 100, H = state.size[1] * 100, n = state.panels.length;
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "Figure (" + state.panels.map(function (p) { return p.title; }).join("; ") + ").");
    svg.setAttribute("style", "max-width:100%;width:" + W + "px;height:auto;font-family:sans-serif");
    state.panels.forEach(function (panel, i) { drawPanel(svg, panel, (i * W) / n, 0, W / n, H); });
    return svg;
  }
  window.manyheadsDrawPanels = drawPanels;

  // A slider moved: its readout's text changed (the widget manager writes it), so draw its box's state.
  if (typeof MutationObserver === "function") {
    new MutationObserver(function (mutations) {
      var boxes = [];
      mutations.forEach(function (mutation) {
        var target = mutation.target.nodeType === 1 ? mutation.target : mutation.target.parentElement;
        var control = target && target.closest && target.closest(".mh-kind--float");
        var box = control && control.closest(".mh-explorer");
        if (box && boxes.indexOf(box) < 0) boxes.push(box);
      });
      boxes.forEach(showState);
    }).observe(document.documentElement, { subtree: true, childList: true, characterData: true });
  }

  document.addEventListener("change", function (event) {
    var control = event.target && event.target.closest && event.target.closest(".mh-control");
    var box = control && control.closest(".mh-explorer");
    if (box) refresh(box);
  });
})();
